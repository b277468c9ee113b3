// SPDX-License-Identifier: BSD-3-Clause
package rlock.interop;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;
import org.redisson.api.RLock;
import org.redisson.client.codec.StringCodec;

/**
 * Redisson's fair lock (getFairLock) and rlock's (rlock_get_fair) are one
 * lock: they exclude each other, and their waiters stand in one queue
 * (redisson_lock_queue:{name}), served in order whatever the language; a
 * waiter that gives up leaves the queue on either side.
 */
class FairLockTest extends InteropTest {

    private static String queue(String name) {
        return name.contains("{") ? "redisson_lock_queue:" + name : "redisson_lock_queue:{" + name + "}";
    }

    private static String timeouts(String name) {
        return name.contains("{") ? "redisson_lock_timeout:" + name : "redisson_lock_timeout:{" + name + "}";
    }

    private static List<String> queued(String name) {
        return redisson.<String>getList(queue(name), StringCodec.INSTANCE).readAll();
    }

    private static int deadlines(String name) {
        return redisson.getScoredSortedSet(timeouts(name), StringCodec.INSTANCE).size();
    }

    /** Waits until name's queue has n waiters. */
    private static void awaitQueue(String name, int n) throws InterruptedException {
        long end = System.currentTimeMillis() + 5000;
        while (queued(name).size() != n) {
            if (System.currentTimeMillis() > end)
                throw new AssertionError("queue of " + name + " is " + queued(name) + ", want " + n + " waiters");
            Thread.sleep(5);
        }
    }

    /** Java and C exclude each other on a fair lock, both ways; a waiter that gives up leaves the queue. */
    @Test
    void excludeEachOther() throws Exception {
        Actor c = actor(30_000, 4);
        String name = Interop.name("fair-excl");
        RLock lock = redisson.getFairLock(name);
        try (JavaThread j = javaThread()) {
            j.run(lock::lock);
            assertEquals("BUSY", c.call(0, "fair trylock 0 " + name).status());
            assertEquals(0, queued(name).size(), "C tryLock(0) queued");
            assertEquals("BUSY", c.call(0, "fair trylock 300 " + name).status());
            assertEquals(0, queued(name).size(), "C waiter did not leave the queue");
            assertEquals(0, deadlines(name), "C waiter did not leave the timeout set");
            j.run(lock::unlock);

            assertEquals("OK", c.call(0, "fair lock " + name).status());
            assertEquals("OK", c.call(0, "fair lock " + name).status());
            assertEquals(2L, c.call(0, "fair count " + name).value());
            assertFalse(j.call(() -> lock.tryLock()));
            assertFalse(j.call(() -> lock.tryLock(300, TimeUnit.MILLISECONDS)));
            assertEquals(0, queued(name).size(), "Java waiter did not leave the queue");
            assertTrue(lock.isLocked());
            assertEquals(1, Interop.hash(redisson, name).size());
            assertEquals("2", Interop.hash(redisson, name).values().iterator().next());
            assertEquals("OK", c.call(0, "fair unlock " + name).status());
            assertEquals("OK", c.call(0, "fair unlock " + name).status());
            assertFalse(lock.isLocked());
            assertTrue(j.call(() -> lock.tryLock()));
            j.run(lock::unlock);
        }
    }

    /**
     * Java holds; then a C waiter, a Java waiter, a C waiter (another
     * process) and a Java waiter queue, in that order. Each release hands the
     * lock to the next in the queue, across languages, promptly (the unlock
     * publishes to the head's own channel; no TTL is waited out).
     */
    /**
     * Redisson's fair tryLock(wait, unit) without a lease queues with the wait
     * read as milliseconds whatever the unit (RedissonLock.tryAcquireAsync passes
     * the wait on with TimeUnit.MILLISECONDS; RedissonFairLock.tryLockInnerAsync
     * converts it with that unit): its deadline in the timeout set is the lock's
     * PTTL + 20 ms for tryLock(20, SECONDS), PTTL + 20 000 ms for
     * tryLock(20_000, MILLISECONDS). docs/redisson.md, "Fair lock", says so.
     */
    @Test
    void tryLockWaitQueuesAsMilliseconds() throws Exception {
        // A 120 s watchdog: no renewal (every 40 s) moves the PTTL while the test reads it.
        Actor c = actor(120_000, 4);
        String name = Interop.name("fair-wait-unit");
        RLock lock = redisson.getFairLock(name);
        assertEquals("OK", c.call(0, "fair lock " + name).status());
        try (JavaThread j = javaThread()) {
            long[] extra = new long[2];
            for (int i = 0; i < 2; i++) {
                Future<Boolean> got = i == 0 ? j.submit(() -> lock.tryLock(20, TimeUnit.SECONDS))
                                             : j.submit(() -> lock.tryLock(20_000, TimeUnit.MILLISECONDS));
                awaitQueue(name, 1);
                String owner = queued(name).get(0);
                Double deadline = redisson.getScoredSortedSet(timeouts(name), StringCodec.INSTANCE).getScore(owner);
                long pttl = redisson.getBucket(name).remainTimeToLive();
                extra[i] = deadline.longValue() - System.currentTimeMillis() - pttl;
                assertEquals("OK", c.call(0, "fair unlock " + name).status());
                assertTrue(got.get(5, TimeUnit.SECONDS));
                j.run(lock::unlock);
                assertEquals("OK", c.call(0, "fair lock " + name).status());
            }
            System.out.printf("FairLockTest: queue deadline - now - PTTL: tryLock(20, SECONDS) %d ms, "
                    + "tryLock(20_000, MILLISECONDS) %d ms%n", extra[0], extra[1]);
            assertTrue(extra[0] > -1000 && extra[0] < 1000, "tryLock(20, SECONDS) queued for " + extra[0] + " ms");
            assertTrue(extra[1] > 19_000 && extra[1] < 21_000,
                    "tryLock(20_000, MILLISECONDS) queued for " + extra[1] + " ms");
            assertEquals("OK", c.call(0, "fair unlock " + name).status());
        }
    }

    @Test
    void fifoAcrossLanguages() throws Exception {
        Actor c1 = actor(30_000, 4), c2 = actor(30_000, 4);
        String name = Interop.name("fair-fifo");
        RLock lock = redisson.getFairLock(name);
        try (JavaThread holder = javaThread(); JavaThread j1 = javaThread(); JavaThread j2 = javaThread()) {
            holder.run(lock::lock);
            c1.send(0, "fair lock " + name);
            awaitQueue(name, 1);
            Future<Long> j1Got = j1.submit(() -> {
                lock.lock();
                return Interop.nowUs();
            });
            awaitQueue(name, 2);
            c2.send(0, "fair lock " + name);
            awaitQueue(name, 3);
            Future<Long> j2Got = j2.submit(() -> {
                lock.lock();
                return Interop.nowUs();
            });
            awaitQueue(name, 4);
            List<String> order = queued(name);
            assertTrue(order.get(0).startsWith(c1.clientId + ":"), "queue " + order);
            assertTrue(order.get(2).startsWith(c2.clientId + ":"), "queue " + order);

            double[] handOff = new double[4];
            long released = holder.call(() -> {
                long t = Interop.nowUs();
                lock.unlock();
                return t;
            });
            Actor.Reply r = c1.await(0, 5000); // 1st: C
            assertEquals("OK", r.status());
            handOff[0] = (r.endUs() - released) / 1000.0;
            Thread.sleep(50);
            assertFalse(j1Got.isDone() || j2Got.isDone(), "a Java waiter overtook the C head");
            assertTrue(c2.pending(0), "the second C waiter overtook the first");

            r = c1.call(0, "fair unlock " + name);
            assertEquals("OK", r.status());
            long at = j1Got.get(5, TimeUnit.SECONDS); // 2nd: Java
            handOff[1] = (at - r.startUs()) / 1000.0;
            Thread.sleep(50);
            assertTrue(c2.pending(0), "C waiter overtook the Java head");
            assertFalse(j2Got.isDone(), "the second Java waiter overtook");

            released = j1.call(() -> {
                long t = Interop.nowUs();
                lock.unlock();
                return t;
            });
            r = c2.await(0, 5000); // 3rd: C, another process
            assertEquals("OK", r.status());
            handOff[2] = (r.endUs() - released) / 1000.0;
            Thread.sleep(50);
            assertFalse(j2Got.isDone(), "a Java waiter overtook the C head");

            r = c2.call(0, "fair unlock " + name);
            assertEquals("OK", r.status());
            at = j2Got.get(5, TimeUnit.SECONDS); // 4th: Java
            handOff[3] = (at - r.startUs()) / 1000.0;
            j2.run(lock::unlock);

            assertEquals(0, queued(name).size());
            assertEquals(0, deadlines(name));
            assertFalse(lock.isLocked());
            WakeUpTest.check("fair hand-off to the queue's head (C, Java, C, Java)", handOff);
        }
    }

    /** Java's forceUnlock of a C-held fair lock wakes the C waiter at the head, not Java's. */
    @Test
    void forceUnlockWakesHead() throws Exception {
        Actor c = actor(30_000, 4);
        String name = Interop.name("fair-force");
        RLock lock = redisson.getFairLock(name);
        try (JavaThread j = javaThread()) {
            assertEquals("OK", c.call(0, "fair lock " + name).status());
            c.send(1, "fair trylock 10000 " + name);
            awaitQueue(name, 1);
            Future<Boolean> javaGot = j.submit(() -> lock.tryLock(10, TimeUnit.SECONDS));
            awaitQueue(name, 2);
            assertTrue(lock.forceUnlock());
            assertEquals("OK", c.await(1, 5000).status());
            Thread.sleep(50);
            assertFalse(javaGot.isDone(), "the Java waiter overtook the C head");
            assertEquals("OK", c.call(1, "fair unlock " + name).status());
            assertTrue(javaGot.get(5, TimeUnit.SECONDS));
            j.run(lock::unlock);
            // The first C thread's hold is gone: its last unlock holds nothing.
            assertEquals("ENOTOWNER", c.call(0, "fair unlock " + name).status());
        }
    }
}
