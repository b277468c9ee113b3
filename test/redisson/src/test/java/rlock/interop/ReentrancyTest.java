// SPDX-License-Identifier: BSD-3-Clause
package rlock.interop;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Map;

import org.junit.jupiter.api.Test;
import org.redisson.api.RLock;

/**
 * Hold counts live in one hash field per owner, "<client id>:<thread id>" ->
 * count, so each side sees the other's reentrant holds as one foreign owner.
 */
class ReentrancyTest extends InteropTest {
    /** C locks twice: Java sees it locked by someone else, with a sane TTL. */
    @Test
    void cHoldsTwiceJavaSees() throws Exception {
        Actor c = actor(30_000, 4);
        String name = Interop.name("reenter-c");
        RLock lock = redisson.getLock(name);
        assertEquals("OK", c.call(0, "lock " + name).status());
        assertEquals("OK", c.call(0, "lock " + name).status());
        assertEquals(2, c.call(0, "count " + name).value());

        Map<String, String> hash = Interop.hash(redisson, name);
        assertEquals(1, hash.size(), hash.toString());
        String field = hash.keySet().iterator().next();
        assertTrue(field.startsWith(c.clientId + ":"), field);
        assertEquals("2", hash.get(field));
        long cThread = Long.parseLong(field.substring(c.clientId.length() + 1));

        try (JavaThread j = javaThread()) {
            // Another owner's count is invisible to getHoldCount (it is per thread).
            assertEquals(0, (int) j.call(lock::getHoldCount));
            assertTrue(j.call(lock::isLocked));
            assertFalse(j.call(lock::isHeldByCurrentThread));
            // Same thread number, different client id: not Java's.
            assertFalse(j.call(() -> lock.isHeldByThread(cThread)));
            long ttl = j.call(lock::remainTimeToLive);
            assertTrue(ttl > 0 && ttl <= 30_000, "remainTimeToLive " + ttl);
            Interop.report("C holds 2: Java isLocked true, getHoldCount 0, remainTimeToLive %d ms, field %s", ttl, field);
            assertFalse(j.call(() -> lock.tryLock()));
            // Java's unlock of C's lock is refused and changes nothing.
            assertThrows(Exception.class, () -> j.run(lock::unlock));
            assertEquals("2", Interop.hash(redisson, name).get(field));

            assertEquals("OK", c.call(0, "unlock " + name).status());
            assertEquals("1", Interop.hash(redisson, name).get(field));
            assertTrue(j.call(lock::isLocked));
            assertEquals("OK", c.call(0, "unlock " + name).status());
            assertFalse(j.call(lock::isLocked));
            assertEquals(-2L, (long) j.call(lock::remainTimeToLive));
        }
    }

    /** Java locks twice: C's queries and raw HGETALL show Java's field at 2. */
    @Test
    void javaHoldsTwiceCSees() throws Exception {
        Actor c = actor(30_000, 4);
        String name = Interop.name("reenter-j");
        RLock lock = redisson.getLock(name);
        try (JavaThread j = javaThread()) {
            j.run(lock::lock);
            j.run(lock::lock);
            assertEquals(2, (int) j.call(lock::getHoldCount));
            String field = redisson.getId() + ":" + j.id();
            assertEquals(Map.of(field, "2"), Interop.hash(redisson, name));

            assertEquals(1, c.call(0, "locked " + name).value());
            assertEquals(0, c.call(0, "held " + name).value());
            assertEquals(0, c.call(0, "count " + name).value());
            Actor.Reply ttl = c.call(0, "ttl " + name);
            assertEquals("OK", ttl.status());
            assertTrue(ttl.value() > 0 && ttl.value() <= 30_000, "rlock_remain_ttl " + ttl.value());
            Interop.report("Java holds 2: C is_locked 1, held 0, hold_count 0, remain_ttl %d ms, HGETALL %s",
                    ttl.value(), Interop.hash(redisson, name));
            assertEquals("BUSY", c.call(0, "trylock 0 " + name).status());
            assertEquals("ENOTOWNER", c.call(0, "unlock " + name).status());
            assertEquals(Map.of(field, "2"), Interop.hash(redisson, name));

            j.run(lock::unlock);
            assertEquals(Map.of(field, "1"), Interop.hash(redisson, name));
            assertEquals("BUSY", c.call(0, "trylock 0 " + name).status());
            j.run(lock::unlock);
            assertEquals(0, c.call(0, "locked " + name).value());
            assertEquals("OK", c.call(0, "trylock 0 " + name).status());
            assertEquals(1, c.call(0, "count " + name).value());
            assertFalse(j.call(() -> lock.tryLock()));
            assertEquals("OK", c.call(0, "unlock " + name).status());
        }
    }
}
