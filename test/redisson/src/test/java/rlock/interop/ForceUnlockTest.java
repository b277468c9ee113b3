// SPDX-License-Identifier: BSD-3-Clause
package rlock.interop;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Map;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;
import org.redisson.api.RLock;

/**
 * Java's forceUnlock() deletes a C thread's watchdog lock. The C client must
 * notice (its renewal or its next call finds the field gone), report the loss
 * exactly once, never renew or re-create the field under the new owner, and
 * answer the thread's unlock as the header says: RLOCK_ENOTOWNER for a last
 * hold, RLOCK_ELOST for a hold count of 2 or more. And rlock_force_unlock
 * of a Java holder wakes a Java waiter.
 */
class ForceUnlockTest extends InteropTest {
    static final long WATCHDOG_MS = 2000; // C renews every ~667 ms

    /** One hold; the watchdog finds the loss while Java holds the lock anew. */
    @Test
    void singleHoldLostByWatchdog() throws Exception {
        Actor c = actor(WATCHDOG_MS, 4);
        String name = Interop.name("force-1");
        RLock lock = redisson.getLock(name);
        try (JavaThread j = javaThread()) {
            assertEquals("OK", c.call(0, "lock " + name).status());
            long t0 = System.currentTimeMillis();
            assertTrue(lock.forceUnlock());
            assertTrue(j.call(() -> lock.tryLock()));
            long detectedMs = awaitLost(c, 1) - t0;
            Interop.report("forceUnlock of a C watchdog lock (watchdog %d ms): C reported the loss after %d ms",
                    WATCHDOG_MS, detectedMs);
            Thread.sleep(3 * WATCHDOG_MS / 3 + 200); // three more renewal rounds
            assertLostOnce(c, 1);

            String javaField = redisson.getId() + ":" + j.id();
            assertEquals(Map.of(javaField, "1"), Interop.hash(redisson, name));
            assertEquals(0, c.call(0, "held " + name).value());
            assertEquals("ENOTOWNER", c.call(0, "unlock " + name).status());
            assertTrue(j.call(lock::isHeldByCurrentThread));
            j.run(lock::unlock);
            assertLostOnce(c, 1);
        }
    }

    /** Two holds, unlocked at once: ELOST (the thread would still "hold" one), then afresh. */
    @Test
    void doubleHoldUnlockedAtOnce() throws Exception {
        Actor c = actor(WATCHDOG_MS, 4);
        String name = Interop.name("force-2");
        RLock lock = redisson.getLock(name);
        assertEquals("OK", c.call(0, "lock " + name).status());
        assertEquals("OK", c.call(0, "lock " + name).status());
        assertTrue(lock.forceUnlock());
        assertEquals("ELOST", c.call(0, "unlock " + name).status());
        awaitLost(c, 1);
        Thread.sleep(3 * WATCHDOG_MS / 3 + 200);
        assertLostOnce(c, 1);
        // The thread holds nothing now: its next unlock is ENOTOWNER, a lock starts at 1.
        assertEquals("ENOTOWNER", c.call(0, "unlock " + name).status());
        assertEquals("OK", c.call(0, "trylock 0 " + name).status());
        assertEquals(1, c.call(0, "count " + name).value());
        assertEquals("OK", c.call(0, "unlock " + name).status());
        assertLostOnce(c, 1);
    }

    /**
     * The other way: rlock_force_unlock of a Java holder's lock deletes it and
     * publishes like Redisson's forceUnlock, so a Java waiter gets it at once;
     * the old Java holder's unlock is refused and leaves the new holder alone.
     */
    @Test
    void cForceUnlocksJavaHolder() throws Exception {
        Actor c = actor(WATCHDOG_MS, 4);
        String name = Interop.name("force-c");
        RLock lock = redisson.getLock(name);
        try (JavaThread holder = javaThread(); JavaThread waiter = javaThread()) {
            holder.run(lock::lock);
            Future<Long> got = waiter.submit(() -> {
                lock.lock();
                return Interop.nowUs();
            });
            Interop.awaitSubscribers(redisson, name, 1);
            Actor.Reply f = c.call(0, "force " + name);
            assertEquals("OK", f.status());
            assertEquals(1, f.value());
            double wakeMs = (got.get(5, TimeUnit.SECONDS) - f.startUs()) / 1000.0;
            Interop.report("rlock_force_unlock of a Java holder: the Java waiter got the lock %.2f ms later", wakeMs);
            assertTrue(wakeMs < 1000);
            assertThrows(ExecutionException.class, () -> holder.run(lock::unlock));
            String waiterField = redisson.getId() + ":" + waiter.id();
            assertEquals(Map.of(waiterField, "1"), Interop.hash(redisson, name));
            waiter.run(lock::unlock);
            assertEquals(0, c.call(0, "force " + name).value());
        }
    }

    /** Polls the actor's on_lock_lost count until it reaches n; returns when (ms). */
    private static long awaitLost(Actor c, long n) throws Exception {
        long end = System.currentTimeMillis() + 5000;
        while (c.call(1, "lost").value() < n) {
            assertTrue(System.currentTimeMillis() < end, "C did not report the loss within 5 s");
            Thread.sleep(10);
        }
        return System.currentTimeMillis();
    }

    private static void assertLostOnce(Actor c, long n) throws Exception {
        assertEquals(n, c.call(1, "lost").value(), "on_lock_lost calls");
        assertEquals(n, c.call(1, "lostevents").value(), "RLOCK_EVENT_LOCK_LOST events");
    }
}
