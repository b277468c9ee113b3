// SPDX-License-Identifier: BSD-3-Clause
package rlock.interop;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.redisson.api.RLock;

/**
 * Names are bytes: the hash key is the name itself and the channel is
 * "redisson_lock__channel:{name}", or "redisson_lock__channel:name" when the
 * name holds a '{' (Redisson then takes it for the user's own hash tag). Both
 * sides must agree byte for byte, or waiters sleep until the lease ends.
 * Interop.awaitSubscribers checks each side subscribes to exactly that channel.
 */
class NamesTest extends InteropTest {
    @ParameterizedTest
    @ValueSource(strings = {
        "{tagged}", "user:{42}:seat", "a{b", "a}b", "}{", "{}", "with space",
        "  leading and trailing  ", "zámek-锁-🔒", "ключ {тег} ✓"})
    void bothDirections(String base) throws Exception {
        Actor c = actor(30_000, 4);
        String name = Interop.name(base);
        RLock lock = redisson.getLock(name);
        try (JavaThread j = javaThread()) {
            // Java holds; C is BUSY, waits, and wakes at Java's unlock.
            j.run(lock::lock);
            assertEquals(1, c.call(0, "locked " + name).value());
            assertEquals("BUSY", c.call(0, "trylock 0 " + name).status());
            c.send(0, "trylock 10000 " + name);
            Interop.awaitSubscribers(redisson, name, 1);
            long unlockUs = j.call(() -> {
                long t = Interop.nowUs();
                lock.unlock();
                return t;
            });
            Actor.Reply r = c.await(0, 5000);
            assertEquals("OK", r.status());
            double toC = (r.endUs() - unlockUs) / 1000.0;
            assertTrue(Interop.hash(redisson, name).keySet().iterator().next().startsWith(c.clientId + ":"));

            // C holds; Java is refused, waits, and wakes at C's unlock.
            assertTrue(j.call(lock::isLocked));
            assertFalse(j.call(() -> lock.tryLock()));
            Future<Long> got = j.submit(() -> {
                assertTrue(lock.tryLock(10, TimeUnit.SECONDS));
                return Interop.nowUs();
            });
            Interop.awaitSubscribers(redisson, name, 1);
            Actor.Reply u = c.call(0, "unlock " + name);
            assertEquals("OK", u.status());
            double toJava = (got.get(5, TimeUnit.SECONDS) - u.startUs()) / 1000.0;
            j.run(lock::unlock);
            assertEquals(0, c.call(0, "locked " + name).value());

            Interop.report("name \"%s\": wake-up Java->C %.2f ms, C->Java %.2f ms", name, toC, toJava);
            assertTrue(toC < 1000 && toJava < 1000);
        }
    }
}
