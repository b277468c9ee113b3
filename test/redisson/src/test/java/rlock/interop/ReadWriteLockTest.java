// SPDX-License-Identifier: BSD-3-Clause
package rlock.interop;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.redisson.api.RBucket;
import org.redisson.api.RReadWriteLock;
import org.redisson.client.codec.StringCodec;

/**
 * Redisson's read-write lock (getReadWriteLock) and rlock's (rlock_get_rw)
 * are one lock: one hash with a "mode" field, a field per reader
 * ("<client id>:<thread id>") and per writer ("...:write"), a key per read
 * hold ("{name}:<field>:rwlock_timeout:<n>"), and one channel,
 * "redisson_rwlock:{name}", where a read unlock that frees the lock
 * publishes "0" and a write unlock "1" (which wakes every waiter). Readers of
 * both languages share it, writers of both exclude everybody, and each
 * side's waiters wake at the other side's unlock.
 */
class ReadWriteLockTest extends InteropTest {

    /** Redisson's channel of a read-write lock (prefixName rule). */
    static String rwChannel(String name) {
        return name.contains("{") ? "redisson_rwlock:" + name : "redisson_rwlock:{" + name + "}";
    }

    /** A read hold's key (suffixName rule): "{name}:field:rwlock_timeout:k". */
    static String holdKey(String name, String field, int k) {
        String prefix = name.contains("{") ? name : "{" + name + "}";
        return prefix + ":" + field + ":rwlock_timeout:" + k;
    }

    /** The one field of client id in the lock's hash that is not "mode" (its reader or writer field). */
    static String fieldOf(String name, String id) {
        for (String f : Interop.hash(redisson, name).keySet())
            if (f.startsWith(id + ":"))
                return f;
        throw new AssertionError("no field of " + id + " in " + Interop.hash(redisson, name));
    }

    static boolean exists(String key) {
        return redisson.getBucket(key, StringCodec.INSTANCE).isExists();
    }

    /** Waits until at least n clients subscribe to the lock's channel. */
    static void awaitSubscribers(String name, int n) throws InterruptedException {
        long end = System.currentTimeMillis() + 5000;
        while (redisson.getTopic(rwChannel(name), StringCodec.INSTANCE).countSubscribers() < n) {
            if (System.currentTimeMillis() > end)
                throw new AssertionError("nobody subscribed to " + rwChannel(name) + " within 5 s");
            Thread.sleep(5);
        }
    }

    /** C reads twice: Java sees Redisson's layout, reads along, and cannot write. */
    @Test
    void cReadsJavaSeesTheLayout() throws Exception {
        Actor c = actor(30_000, 4);
        String name = Interop.name("rw-layout");
        RReadWriteLock rw = redisson.getReadWriteLock(name);
        try (JavaThread j = javaThread()) {
            assertEquals("OK", c.call(0, "read lock " + name).status());
            assertEquals("OK", c.call(0, "read lock " + name).status());
            String field = fieldOf(name, c.clientId);
            assertEquals(Map.of("mode", "read", field, "2"), Interop.hash(redisson, name));
            assertTrue(exists(holdKey(name, field, 1)) && exists(holdKey(name, field, 2)));
            assertTrue(j.call(() -> rw.readLock().isLocked()));
            assertFalse(j.call(() -> rw.writeLock().isLocked()));
            assertFalse(j.call(() -> rw.writeLock().tryLock()));
            assertTrue(j.call(() -> rw.readLock().tryLock())); // shared
            String javaField = redisson.getId() + ":" + j.id();
            assertEquals("1", Interop.hash(redisson, name).get(javaField));
            assertTrue(exists(holdKey(name, javaField, 1)));
            assertEquals("EDEADLK", c.call(0, "write trylock 0 " + name).status());
            assertEquals("BUSY", c.call(1, "write trylock 0 " + name).status());
            j.run(() -> rw.readLock().unlock());
            assertEquals("OK", c.call(0, "read unlock " + name).status());
            assertFalse(exists(holdKey(name, field, 2)));
            assertEquals("1", Interop.hash(redisson, name).get(field));
            assertEquals("OK", c.call(0, "read unlock " + name).status());
            assertFalse(redisson.getKeys().countExists(name) > 0, "the lock was left");
        }
    }

    /** Java writes (twice) and downgrades: C sees it, is refused, and reads once Java's write lock goes. */
    @Test
    void javaWritesCSees() throws Exception {
        Actor c = actor(30_000, 4);
        String name = Interop.name("rw-jwrite");
        RReadWriteLock rw = redisson.getReadWriteLock(name);
        try (JavaThread j = javaThread()) {
            j.run(() -> rw.writeLock().lock());
            j.run(() -> rw.writeLock().lock());
            String writer = redisson.getId() + ":" + j.id() + ":write";
            assertEquals(Map.of("mode", "write", writer, "2"), Interop.hash(redisson, name));
            assertEquals(1, c.call(0, "write locked " + name).value());
            assertEquals(0, c.call(0, "read locked " + name).value());
            assertEquals(0, c.call(0, "write count " + name).value());
            assertEquals("BUSY", c.call(0, "write trylock 0 " + name).status());
            assertEquals("BUSY", c.call(0, "read trylock 0 " + name).status());
            assertEquals("ENOTOWNER", c.call(0, "write unlock " + name).status());
            assertEquals(0, c.call(0, "read force " + name).value()); // not in read mode
            assertEquals(2, (int) j.call(() -> rw.writeLock().getHoldCount()));
            j.run(() -> rw.readLock().lock()); // Redisson's downgrade
            assertEquals(1, c.call(0, "read locked " + name).value()); // write mode + a reader
            j.run(() -> rw.writeLock().unlock());
            j.run(() -> rw.writeLock().unlock());
            assertEquals("read", Interop.hash(redisson, name).get("mode"));
            assertEquals("OK", c.call(0, "read trylock 0 " + name).status()); // shared with Java's read
            assertEquals("OK", c.call(0, "read unlock " + name).status());
            j.run(() -> rw.readLock().unlock());
            assertEquals(0, c.call(0, "read locked " + name).value());
        }
    }

    /** Java holds the write lock; two C readers wait and both go at its unlock ("1"). */
    @Test
    void javaWriteUnlockWakesCReaders() throws Exception {
        Actor c = actor(30_000, 4);
        String name = Interop.name("rw-j2c-readers");
        RReadWriteLock rw = redisson.getReadWriteLock(name);
        try (JavaThread j = javaThread()) {
            j.run(() -> rw.writeLock().lock());
            c.send(0, "read trylock 10000 " + name);
            c.send(1, "read trylock 10000 " + name);
            awaitSubscribers(name, 1);
            Thread.sleep(100);
            assertTrue(c.pending(0) && c.pending(1), "a C reader got a lock Java writes");
            long unlockUs = j.call(() -> {
                long t = Interop.nowUs();
                rw.writeLock().unlock();
                return t;
            });
            double[] ms = new double[2];
            for (int t = 0; t < 2; t++) {
                Actor.Reply r = c.await(t, 5000);
                assertEquals("OK", r.status());
                ms[t] = (r.endUs() - unlockUs) / 1000.0;
            }
            WakeUpTest.check("Java write unlock -> both C readers return", ms);
            assertEquals(3, Interop.hash(redisson, name).size()); // mode + two C readers
            assertEquals("OK", c.call(0, "read unlock " + name).status());
            assertEquals("OK", c.call(1, "read unlock " + name).status());
        }
    }

    /** Java reads; a C writer is refused, waits, and goes at Java's read unlock ("0"). */
    @Test
    void javaReadUnlockWakesCWriter() throws Exception {
        Actor c = actor(30_000, 4);
        String name = Interop.name("rw-j2c-writer");
        RReadWriteLock rw = redisson.getReadWriteLock(name);
        double[] ms = new double[5];
        try (JavaThread j = javaThread()) {
            for (int i = 0; i < ms.length; i++) {
                j.run(() -> rw.readLock().lock());
                assertEquals("BUSY", c.call(0, "write trylock 0 " + name).status());
                c.send(0, "write trylock 10000 " + name);
                awaitSubscribers(name, 1);
                Thread.sleep(50);
                assertTrue(c.pending(0), "C wrote while Java reads");
                long unlockUs = j.call(() -> {
                    long t = Interop.nowUs();
                    rw.readLock().unlock();
                    return t;
                });
                Actor.Reply r = c.await(0, 5000);
                assertEquals("OK", r.status());
                ms[i] = (r.endUs() - unlockUs) / 1000.0;
                assertEquals("write", Interop.hash(redisson, name).get("mode"));
                assertFalse(j.call(() -> rw.readLock().tryLock()));
                assertEquals("OK", c.call(0, "write unlock " + name).status());
            }
            WakeUpTest.check("Java read unlock -> C writer returns", ms);
        }
    }

    /** C writes; Java readers wait and go at C's write unlock; C reads, a Java writer goes at its read unlock. */
    @Test
    void cUnlocksWakeJava() throws Exception {
        Actor c = actor(30_000, 4);
        String name = Interop.name("rw-c2j");
        RReadWriteLock rw = redisson.getReadWriteLock(name);
        try (JavaThread r1 = javaThread(); JavaThread r2 = javaThread(); JavaThread w = javaThread()) {
            assertEquals("OK", c.call(0, "write lock " + name).status());
            assertFalse(r1.call(() -> rw.readLock().tryLock()));
            Future<Long> got1 = r1.submit(() -> {
                assertTrue(rw.readLock().tryLock(10, TimeUnit.SECONDS));
                return Interop.nowUs();
            });
            Future<Long> got2 = r2.submit(() -> {
                assertTrue(rw.readLock().tryLock(10, TimeUnit.SECONDS));
                return Interop.nowUs();
            });
            awaitSubscribers(name, 1);
            Thread.sleep(100);
            assertFalse(got1.isDone() || got2.isDone(), "Java read while C writes");
            Actor.Reply u = c.call(0, "write unlock " + name);
            assertEquals("OK", u.status());
            double[] readers = {(got1.get(5, TimeUnit.SECONDS) - u.startUs()) / 1000.0,
                                (got2.get(5, TimeUnit.SECONDS) - u.startUs()) / 1000.0};
            WakeUpTest.check("C write unlock -> both Java readers return", readers);
            r1.run(() -> rw.readLock().unlock());
            r2.run(() -> rw.readLock().unlock());

            assertEquals("OK", c.call(0, "read lock " + name).status());
            assertFalse(w.call(() -> rw.writeLock().tryLock()));
            Future<Long> wrote = w.submit(() -> {
                assertTrue(rw.writeLock().tryLock(10, TimeUnit.SECONDS));
                return Interop.nowUs();
            });
            awaitSubscribers(name, 1);
            Thread.sleep(100);
            assertFalse(wrote.isDone(), "Java wrote while C reads");
            u = c.call(0, "read unlock " + name);
            assertEquals("OK", u.status());
            double[] writer = {(wrote.get(5, TimeUnit.SECONDS) - u.startUs()) / 1000.0};
            WakeUpTest.check("C read unlock -> Java writer returns", writer);
            w.run(() -> rw.writeLock().unlock());
        }
    }

    /**
     * C readers sharing one hold as examples/shared_read.c builds it (rlock
     * no longer does; rlock_config.shared_reads_ms is ignored): one explicit
     * owner's read hold, taken on one C thread and given back on another.
     * Java sees ONE reader of the C process (count 1, one hold key), reads
     * along, cannot write, and a Java writer waiting goes at the owner's
     * unlock.
     */
    @Test
    void cSharedReadHoldJavaWriterWaits() throws Exception {
        Actor c = actor(30_000, 0);
        String name = Interop.name("rw-shared");
        String owner = "4611686018427387905"; // RLOCK_OWNER_CALLER_MIN + 1
        RReadWriteLock rw = redisson.getReadWriteLock(name);
        try (JavaThread j = javaThread(); JavaThread w = javaThread()) {
            assertEquals("OK", c.call(0, "read as " + owner + " lock " + name).status());
            String field = c.clientId + ":" + owner;
            assertEquals(Map.of("mode", "read", field, "1"), Interop.hash(redisson, name));
            assertTrue(exists(holdKey(name, field, 1)) && !exists(holdKey(name, field, 2)));
            assertEquals(1L, c.call(1, "read as " + owner + " count " + name).value());
            assertTrue(j.call(() -> rw.readLock().tryLock())); // shared with Java
            j.run(() -> rw.readLock().unlock());
            assertFalse(w.call(() -> rw.writeLock().tryLock()));
            Future<Long> wrote = w.submit(() -> {
                assertTrue(rw.writeLock().tryLock(10, TimeUnit.SECONDS));
                return Interop.nowUs();
            });
            awaitSubscribers(name, 1);
            Thread.sleep(50);
            assertFalse(wrote.isDone(), "Java wrote while the C owner reads");
            Actor.Reply u = c.call(1, "read as " + owner + " unlock " + name);
            assertEquals("OK", u.status());
            double[] writer = {(wrote.get(5, TimeUnit.SECONDS) - u.startUs()) / 1000.0};
            WakeUpTest.check("shared C read hold's unlock -> Java writer returns", writer);
            assertEquals("write", Interop.hash(redisson, name).get("mode"));
            w.run(() -> rw.writeLock().unlock());
        }
    }

    /**
     * C downgrades (writes, reads, releases the write lock): the lock stays in
     * read mode for its read hold, and rlock publishes "1" on that switch
     * (Redisson does not), so a Java reader waiting behind the writer goes at
     * once instead of at its poll.
     */
    @Test
    void cDowngradeWakesJavaReader() throws Exception {
        Actor c = actor(30_000, 4);
        String name = Interop.name("rw-cdown");
        RReadWriteLock rw = redisson.getReadWriteLock(name);
        try (JavaThread j = javaThread()) {
            assertEquals("OK", c.call(0, "write lock " + name).status());
            assertEquals("OK", c.call(0, "read lock " + name).status());
            Future<Long> got = j.submit(() -> {
                assertTrue(rw.readLock().tryLock(10, TimeUnit.SECONDS));
                return Interop.nowUs();
            });
            awaitSubscribers(name, 1);
            Thread.sleep(100);
            assertFalse(got.isDone());
            Actor.Reply u = c.call(0, "write unlock " + name);
            assertEquals("OK", u.status());
            double[] ms = {(got.get(5, TimeUnit.SECONDS) - u.startUs()) / 1000.0};
            WakeUpTest.check("C downgrade (write unlock, still reading) -> Java reader returns", ms);
            assertEquals("read", Interop.hash(redisson, name).get("mode"));
            assertEquals(3, Interop.hash(redisson, name).size());
            j.run(() -> rw.readLock().unlock());
            assertEquals("OK", c.call(0, "read unlock " + name).status());
            assertFalse(redisson.getKeys().countExists(name) > 0);
        }
    }

    /** Java's forceUnlock of C's read and write locks: C reports each loss exactly once. */
    @Test
    void javaForceUnlockLostOnce() throws Exception {
        long watchdogMs = 2000;
        Actor c = actor(watchdogMs, 4);
        String name = Interop.name("rw-force");
        RReadWriteLock rw = redisson.getReadWriteLock(name);
        assertEquals("OK", c.call(0, "read lock " + name).status());
        assertFalse(rw.writeLock().forceUnlock()); // not in write mode: Redisson's rule
        assertTrue(rw.readLock().forceUnlock());
        awaitLost(c, 1);
        Thread.sleep(watchdogMs + 200); // three more rounds
        assertLost(c, 1);
        assertEquals("ENOTOWNER", c.call(0, "read unlock " + name).status());

        assertEquals("OK", c.call(0, "write lock " + name).status());
        assertEquals("OK", c.call(0, "write lock " + name).status());
        assertTrue(rw.writeLock().forceUnlock());
        awaitLost(c, 2);
        Thread.sleep(watchdogMs + 200);
        assertLost(c, 2);
        assertEquals("ELOST", c.call(0, "write unlock " + name).status()); // it believed in two
        assertEquals("ENOTOWNER", c.call(0, "write unlock " + name).status());
        assertLost(c, 2);
        // And the other way: rlock's force of a Java writer wakes a Java reader ("1").
        try (JavaThread w = javaThread(); JavaThread r = javaThread()) {
            w.run(() -> rw.writeLock().lock());
            Future<Boolean> read = r.submit(() -> rw.readLock().tryLock(10, TimeUnit.SECONDS));
            awaitSubscribers(name, 1);
            Actor.Reply f = c.call(0, "write force " + name);
            assertEquals(1, f.value());
            assertTrue(read.get(5, TimeUnit.SECONDS));
            r.run(() -> rw.readLock().unlock());
        }
    }

    private static void awaitLost(Actor c, long n) throws Exception {
        long end = System.currentTimeMillis() + 5000;
        while (c.call(1, "lost").value() < n) {
            assertTrue(System.currentTimeMillis() < end, "C did not report the loss within 5 s");
            Thread.sleep(10);
        }
    }

    private static void assertLost(Actor c, long n) throws Exception {
        assertEquals(n, c.call(1, "lost").value(), "on_lock_lost calls");
        assertEquals(n, c.call(1, "lostevents").value(), "RLOCK_EVENT_LOCK_LOST events");
    }

    /** Names are bytes; keys and channel must agree byte for byte, braces and all. */
    @ParameterizedTest
    @ValueSource(strings = {"{tagged}", "user:{42}:seat", "a{b", "a}b", "with space", "zámek-锁-🔒"})
    void names(String base) throws Exception {
        Actor c = actor(30_000, 4);
        String name = Interop.name(base);
        RReadWriteLock rw = redisson.getReadWriteLock(name);
        try (JavaThread j = javaThread()) {
            // C reads: its hold key is where Java looks; a Java writer waits and goes at C's unlock.
            assertEquals("OK", c.call(0, "read lock " + name).status());
            assertTrue(exists(holdKey(name, fieldOf(name, c.clientId), 1)));
            Future<Long> wrote = j.submit(() -> {
                assertTrue(rw.writeLock().tryLock(10, TimeUnit.SECONDS));
                return Interop.nowUs();
            });
            awaitSubscribers(name, 1);
            Actor.Reply u = c.call(0, "read unlock " + name);
            double toJava = (wrote.get(5, TimeUnit.SECONDS) - u.startUs()) / 1000.0;
            // Java writes; C readers wait and go at its unlock.
            c.send(0, "read trylock 10000 " + name);
            awaitSubscribers(name, 1);
            long unlockUs = j.call(() -> {
                long t = Interop.nowUs();
                rw.writeLock().unlock();
                return t;
            });
            Actor.Reply r = c.await(0, 5000);
            assertEquals("OK", r.status());
            double toC = (r.endUs() - unlockUs) / 1000.0;
            assertEquals("OK", c.call(0, "read unlock " + name).status());
            Interop.report("read-write name \"%s\": wake-up C->Java %.2f ms, Java->C %.2f ms", name, toJava, toC);
            assertTrue(toC < 1000 && toJava < 1000);
        }
    }

    static final long MS = 10_000;
    static final int C_THREADS = 4; // per C process: two readers, two writers

    /**
     * 2 Java threads (a reader and a writer) and 2 C processes x 4 threads
     * (two readers, two writers each) on one read-write lock for 10 s.
     * Writers increment a counter with GET then SET; readers check it does
     * not change while they read. The counter must equal the writes, no
     * reader may see a change, and every thread of every side acquires.
     */
    @Test
    void stress() throws Exception {
        String name = Interop.name("rw-stress");
        String counter = Interop.name("rw-stress-counter").replace(' ', '_');
        Actor[] actors = {actor(30_000, 4), actor(30_000, 4)};
        for (Actor a : actors)
            for (int t = 0; t < C_THREADS; t++)
                a.send(t, (t % 2 == 0 ? "read" : "write") + " stress " + MS + " " + counter + " " + name);
        List<Future<Long>> java = new ArrayList<>();
        java.add(javaThread().submit(() -> javaLoop(name, counter, false)));
        java.add(javaThread().submit(() -> javaLoop(name, counter, true)));

        long writes = 0;
        StringBuilder counts = new StringBuilder();
        for (int i = 0; i < java.size(); i++) {
            long n = java.get(i).get(MS + 30_000, TimeUnit.MILLISECONDS);
            counts.append(String.format("java-%s=%d ", i == 0 ? "reader" : "writer", n));
            assertTrue(n > 0, "a Java thread never acquired the lock");
            if (i == 1)
                writes += n;
        }
        for (int a = 0; a < actors.length; a++) {
            for (int t = 0; t < C_THREADS; t++) {
                Actor.Reply r = actors[a].await(t, MS + 30_000);
                assertEquals("OK", r.status(), "C process " + a + " thread " + t);
                counts.append(String.format("c%d.%s%d=%d ", a, t % 2 == 0 ? "r" : "w", t, r.value()));
                assertTrue(r.value() > 0, "C process " + a + " thread " + t + " never acquired the lock");
                if (t % 2 == 1)
                    writes += r.value();
            }
        }
        RBucket<String> bucket = redisson.getBucket(counter, StringCodec.INSTANCE);
        long value = Long.parseLong(bucket.get());
        Interop.report("read-write stress %d s: counter %d, writes %d: %s", MS / 1000, value, writes,
                counts.toString().trim());
        assertEquals(writes, value, "lost increments: a writer overlapped someone");
        assertFalse(redisson.getKeys().countExists(name) > 0, "the lock was left held");
    }

    /** A Java thread's loop: writer (GET, SET + 1) or reader (GET, GET: equal); returns its iterations. */
    private static long javaLoop(String name, String counter, boolean writer) {
        RReadWriteLock rw = redisson.getReadWriteLock(name);
        if (writer)
            return Interop.loopUnder(rw.writeLock(), redisson, counter, MS, Interop::increment);
        return Interop.loopUnder(rw.readLock(), redisson, counter, MS, bucket -> {
            String v = bucket.get();
            assertEquals(v, bucket.get(), "the counter changed while Java read");
        });
    }
}
