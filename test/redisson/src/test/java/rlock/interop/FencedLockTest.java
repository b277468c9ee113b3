// SPDX-License-Identifier: BSD-3-Clause
package rlock.interop;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Map;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;
import org.redisson.api.RFencedLock;
import org.redisson.api.RLock;
import org.redisson.client.codec.StringCodec;

/**
 * Redisson's fenced lock (getFencedLock) and rlock's (rlock_get_fenced) are
 * one lock with one token counter, redisson_lock_token:{name}: tokens of Java
 * and C acquisitions interleave on it and only ever grow. And a Java async
 * caller's threadId (lock(lease, unit, threadId)) and a C explicit owner
 * (rlock_lock_as) name their holds the same way: "<client uuid>:<id>".
 */
class FencedLockTest extends InteropTest {

    private static long counter(String name) {
        Object v = redisson.getBucket("redisson_lock_token:{" + name + "}", StringCodec.INSTANCE).get();
        return v == null ? 0 : Long.parseLong(v.toString());
    }

    /** Java and C acquisitions, first and reentrant, draw strictly increasing tokens from one counter. */
    @Test
    void tokensInterleave() throws Exception {
        Actor c = actor(30_000, 4);
        String name = Interop.name("fenced-tokens");
        RFencedLock lock = redisson.getFencedLock(name);
        try (JavaThread j = javaThread()) {
            long t1 = j.call(() -> lock.lockAndGetToken());
            assertEquals(1L, t1);
            assertEquals("BUSY", c.call(0, "fenced trylock 0 " + name).status());
            assertEquals(1L, counter(name), "a refused C attempt took a token");
            j.run(lock::unlock);

            Actor.Reply r = c.call(0, "fenced lock " + name);
            assertEquals("OK", r.status());
            assertEquals(t1 + 1, r.value());
            r = c.call(0, "fenced lock " + name); // reentrant: a new token, as in Redisson
            assertEquals(t1 + 2, r.value());
            // tryLockAndGetToken() would wait for ever (Redisson passes wait -1, "no limit",
            // see docs/redisson.md): one attempt is tryLockAndGetToken(0, -1, unit).
            assertNull(j.call(() -> lock.tryLockAndGetToken(0, -1, TimeUnit.MILLISECONDS)));
            assertEquals(t1 + 2, (long) lock.getToken());
            assertEquals(t1 + 2, c.call(1, "fenced token " + name).value());
            assertEquals("OK", c.call(0, "fenced unlock " + name).status());
            assertEquals("OK", c.call(0, "fenced unlock " + name).status());
            assertFalse(lock.isLocked());

            long t4 = j.call(() -> lock.tryLockAndGetToken(1, -1, TimeUnit.SECONDS));
            assertEquals(t1 + 3, t4);
            j.run(lock::lock); // a plain lock() counts too, on both sides
            assertEquals(t1 + 4, (long) lock.getToken());
            j.run(lock::unlock);
            j.run(lock::unlock);
            assertEquals("OK", c.call(0, "fenced lock " + name).status());
            assertEquals("OK", c.call(0, "fenced unlock " + name).status());
            assertEquals(t1 + 5, c.call(0, "fenced token " + name).value());

            // The Java side waits for a C holder and gets the next token at its unlock.
            assertEquals("OK", c.call(0, "fenced lock " + name).status());
            var waiting = j.submit(() -> lock.tryLockAndGetToken(10, -1, TimeUnit.SECONDS));
            Thread.sleep(100);
            assertEquals("OK", c.call(0, "fenced unlock " + name).status());
            assertEquals(t1 + 7, (long) waiting.get(10, TimeUnit.SECONDS));
            j.run(lock::unlock);
        }
    }

    /**
     * A Java caller passing threadId to the async API and a C caller passing
     * the same number as an explicit owner write "<their client's uuid>:<id>":
     * the same scheme, two owners (two uuids). Within each client the id is
     * the owner, whatever thread acts for it.
     */
    @Test
    void threadIdMapsLikeExplicitOwner() throws Exception {
        Actor c = actor(30_000, 4);
        String name = Interop.name("owner-map");
        RLock lock = redisson.getLock(name);
        long id = 77;

        lock.lockAsync(-1, TimeUnit.MILLISECONDS, id).get(10, TimeUnit.SECONDS);
        Map<String, String> h = Interop.hash(redisson, name);
        assertEquals(Map.of(redisson.getId() + ":" + id, "1"), h);
        assertTrue(lock.isHeldByThread(id));
        // The same number in the C client is another owner: refused, and not holding.
        assertEquals("BUSY", c.call(0, "as " + id + " trylock 0 " + name).status());
        assertEquals(0L, c.call(0, "as " + id + " held " + name).value());
        // Java releases from another thread, by id.
        try (JavaThread j = javaThread()) {
            j.call(() -> lock.unlockAsync(id).get(10, TimeUnit.SECONDS));
        }
        assertFalse(lock.isLocked());

        // C takes it as owner 77 on worker 0 and re-enters on worker 1.
        assertEquals("OK", c.call(0, "as " + id + " lock " + name).status());
        assertEquals("OK", c.call(1, "as " + id + " lock " + name).status());
        assertEquals(Map.of(c.clientId + ":" + id, "2"), Interop.hash(redisson, name));
        assertFalse(lock.isHeldByThread(id), "Java's own 77 is another owner");
        assertFalse(lock.tryLockAsync(0, -1, TimeUnit.MILLISECONDS, id).get(10, TimeUnit.SECONDS));
        assertEquals(2L, c.call(2, "as " + id + " count " + name).value());
        assertEquals("OK", c.call(2, "as " + id + " unlock " + name).status());
        assertEquals("OK", c.call(3, "as " + id + " unlock " + name).status());
        assertFalse(lock.isLocked());

        // An id from the range C callers pick for themselves fits a Java long too.
        long big = (1L << 62) + 5;
        assertEquals("OK", c.call(0, "as " + big + " lock " + name).status());
        assertEquals(Map.of(c.clientId + ":" + big, "1"), Interop.hash(redisson, name));
        assertEquals("OK", c.call(1, "as " + big + " unlock " + name).status());
        assertFalse(lock.isLocked());
    }
}
