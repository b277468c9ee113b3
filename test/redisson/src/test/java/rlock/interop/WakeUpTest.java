// SPDX-License-Identifier: BSD-3-Clause
package rlock.interop;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Arrays;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;
import org.redisson.api.RLock;

/**
 * A waiter on one side is woken by the other side's unlock message, not by the
 * lease running out: the holder's lease is 30 s, and we require the wake-up
 * within 1 s (it is normally about a millisecond).
 */
class WakeUpTest extends InteropTest {
    static final int ROUNDS = 10;

    /** Java holds; a C thread is BUSY, then blocks and gets it at Java's unlock. */
    @Test
    void javaUnlockWakesCWaiter() throws Exception {
        Actor c = actor(30_000, 4);
        double[] lock = new double[ROUNDS], tryLock = new double[ROUNDS];
        for (int i = 0; i < ROUNDS; i++) {
            lock[i] = javaToC(c, "lock ");
            tryLock[i] = javaToC(c, "trylock 10000 ");
        }
        check("Java unlock -> C rlock_lock returns", lock);
        check("Java unlock -> C rlock_try_lock(10 s) returns", tryLock);
    }

    /** One round: returns the wake-up latency in ms. */
    private double javaToC(Actor c, String waitCommand) throws Exception {
        String name = Interop.name("wake-j2c");
        RLock lock = redisson.getLock(name);
        try (JavaThread j = javaThread()) {
            j.run(lock::lock);
            assertEquals("BUSY", c.call(0, "trylock 0 " + name).status());
            c.send(0, waitCommand + name);
            Interop.awaitSubscribers(redisson, name, 1); // the C waiter is listening
            Thread.sleep(50);
            assertTrue(c.pending(0), "C acquired a lock Java holds");
            // Stamped on the Java thread itself, just before its unlock() starts.
            long unlockUs = j.call(() -> {
                long t = Interop.nowUs();
                lock.unlock();
                return t;
            });
            Actor.Reply r = c.await(0, 5000);
            assertEquals("OK", r.status());
            assertEquals(Integer.valueOf(1), Integer.valueOf(Interop.hash(redisson, name).size()));
            assertTrue(Interop.hash(redisson, name).containsKey(c.clientId + ":" + ownerThread(name)));
            assertEquals("OK", c.call(0, "unlock " + name).status());
            return (r.endUs() - unlockUs) / 1000.0;
        }
    }

    /** The thread id part of the only field of the lock hash. */
    private static String ownerThread(String name) {
        String field = Interop.hash(redisson, name).keySet().iterator().next();
        return field.substring(field.lastIndexOf(':') + 1);
    }

    /** C holds; a Java thread's tryLock(0) fails, then lock() gets it at C's unlock. */
    @Test
    void cUnlockWakesJavaWaiter() throws Exception {
        Actor c = actor(30_000, 4);
        double[] lock = new double[ROUNDS], tryLock = new double[ROUNDS];
        for (int i = 0; i < ROUNDS; i++) {
            lock[i] = cToJava(c, false);
            tryLock[i] = cToJava(c, true);
        }
        check("C unlock -> Java lock() returns", lock);
        check("C unlock -> Java tryLock(10 s) returns", tryLock);
    }

    private double cToJava(Actor c, boolean withTryLock) throws Exception {
        String name = Interop.name("wake-c2j");
        RLock lock = redisson.getLock(name);
        try (JavaThread j = javaThread()) {
            assertEquals("OK", c.call(0, "lock " + name).status());
            assertFalse(j.call(() -> lock.tryLock()));
            Future<Long> acquired = j.submit(() -> {
                if (withTryLock)
                    assertTrue(lock.tryLock(10, TimeUnit.SECONDS));
                else
                    lock.lock();
                return Interop.nowUs();
            });
            Interop.awaitSubscribers(redisson, name, 1); // the Java waiter is listening
            Thread.sleep(50);
            assertFalse(acquired.isDone(), "Java acquired a lock C holds");
            Actor.Reply r = c.call(0, "unlock " + name);
            assertEquals("OK", r.status());
            long at = acquired.get(5, TimeUnit.SECONDS);
            assertTrue(j.call(lock::isHeldByCurrentThread));
            j.run(lock::unlock);
            return (at - r.startUs()) / 1000.0;
        }
    }

    /** Prints min / median / max and asserts every wake-up took less than 1 s. */
    static void check(String what, double[] ms) {
        double[] s = ms.clone();
        Arrays.sort(s);
        Interop.report("wake-up %s: min %.2f ms, median %.2f ms, max %.2f ms (%d rounds)",
                what, s[0], s[s.length / 2], s[s.length - 1], s.length);
        assertTrue(s[s.length - 1] < 1000, what + " took " + s[s.length - 1] + " ms: woken by TTL, not pub/sub?");
    }
}
