// SPDX-License-Identifier: BSD-3-Clause
package rlock.interop;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Map;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;
import org.redisson.api.RLock;
import org.redisson.api.RedissonClient;

/**
 * The two sides' watchdog timeouts need not match: each holder renews its own
 * lease (Redisson lockWatchdogTimeout 5000 -> every ~1667 ms; rlock
 * watchdog_timeout_ms 2000 -> every ~667 ms), and a waiter on the other side
 * is woken by the unlock message, whatever the holder's lease.
 */
class WatchdogTest extends InteropTest {
    static final long JAVA_WD = 5000, C_WD = 2000;

    @Test
    void differentTimeoutsEachSideRenewsItsOwn() throws Exception {
        RedissonClient java5s = Interop.redisson(JAVA_WD);
        try (JavaThread j = javaThread()) {
            Actor c = actor(C_WD, 0);
            String name = Interop.name("watchdog");
            RLock lock = java5s.getLock(name);

            // Java holds for 11 s (> 2 leases, ~6 renewals) while a C thread waits.
            j.run(lock::lock);
            String javaField = java5s.getId() + ":" + j.id();
            c.send(0, "lock " + name);
            long minJava = watchTtl(name, JAVA_WD, 11_000, Map.of(javaField, "1"));
            assertEquals("BUSY", c.call(1, "trylock 0 " + name).status());
            assertTrue(c.pending(0), "C acquired a lock Java holds");
            long unlockUs = j.call(() -> {
                long t = Interop.nowUs();
                lock.unlock();
                return t;
            });
            Actor.Reply got = c.await(0, 5000);
            assertEquals("OK", got.status());
            double cWake = (got.endUs() - unlockUs) / 1000.0;

            // C holds for 6 s (3 leases, ~9 renewals) while a Java thread waits.
            String cField = Interop.hash(redisson, name).keySet().iterator().next();
            assertTrue(cField.startsWith(c.clientId + ":"), cField);
            Future<Long> javaGot = j.submit(() -> {
                lock.lock();
                return Interop.nowUs();
            });
            long minC = watchTtl(name, C_WD, 6_000, Map.of(cField, "1"));
            assertFalse(javaGot.isDone(), "Java acquired a lock C holds");
            Actor.Reply unlocked = c.call(0, "unlock " + name);
            assertEquals("OK", unlocked.status());
            double javaWake = (javaGot.get(5, TimeUnit.SECONDS) - unlocked.startUs()) / 1000.0;
            long ttl = j.call(lock::remainTimeToLive);
            assertTrue(ttl > JAVA_WD - 1000 && ttl <= JAVA_WD, "Java's lease " + ttl);
            j.run(lock::unlock);

            Interop.report("watchdogs Java %d ms / C %d ms: Java's lock held 11 s, min PTTL %d ms; C's held 6 s, min PTTL %d ms",
                    JAVA_WD, C_WD, minJava, minC);
            Interop.report("watchdogs: C waiter woke %.2f ms after Java's unlock, Java waiter %.2f ms after C's", cWake, javaWake);
            assertTrue(cWake < 1000 && javaWake < 1000);
        } finally {
            java5s.shutdown();
        }
    }

    /**
     * Watches the key for ms: it must keep exactly the given owner, and its
     * PTTL stay within (0, lease]. Returns the smallest PTTL seen: renewals
     * every lease/3 keep it above about lease/2 even with a slow round.
     */
    private static long watchTtl(String name, long lease, long ms, Map<String, String> owner) throws Exception {
        long end = System.currentTimeMillis() + ms, min = Long.MAX_VALUE;
        while (System.currentTimeMillis() < end) {
            long ttl = redisson.getKeys().remainTimeToLive(name);
            assertTrue(ttl > 0 && ttl <= lease, "PTTL " + ttl + " with lease " + lease);
            min = Math.min(min, ttl);
            Thread.sleep(50);
        }
        assertEquals(owner, Interop.hash(redisson, name));
        assertTrue(min > lease / 3, "min PTTL " + min + ": renewals are late");
        return min;
    }
}
