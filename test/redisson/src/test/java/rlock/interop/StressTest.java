// SPDX-License-Identifier: BSD-3-Clause
package rlock.interop;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.redisson.api.RBucket;
import org.redisson.client.codec.StringCodec;

/**
 * Mutual exclusion under mixed contention: 2 Java threads and 2 C processes x
 * 4 threads increment a counter with a plain GET then SET under one lock for
 * 10 s. Any overlap of two holders loses an increment, so the final counter
 * must equal the sum of everybody's iterations. Run twice: both C processes
 * releasing on every unlock like Redisson (local_handoffs 0), then one of
 * them handing the lock to its own waiters up to 4 times in a row (the
 * default), which shifts the shares but must not break exclusion.
 */
class StressTest extends InteropTest {
    static final long MS = 10_000;
    static final int JAVA_THREADS = 2, C_THREADS = 4;

    @ParameterizedTest(name = "local_handoffs 0 and {0}")
    @ValueSource(ints = {0, 4})
    void counterIsExact(int secondHandoffs) throws Exception {
        String name = Interop.name("stress");
        String counter = Interop.name("stress-counter").replace(' ', '_');
        Actor[] actors = {actor(30_000, 0), actor(30_000, secondHandoffs)};
        List<Future<Long>> java = new ArrayList<>();

        for (Actor a : actors)
            for (int t = 0; t < C_THREADS; t++)
                a.send(t, "stress " + MS + " " + counter + " " + name);
        for (int i = 0; i < JAVA_THREADS; i++)
            java.add(javaThread().submit(() -> javaLoop(name, counter)));

        long total = 0;
        StringBuilder counts = new StringBuilder();
        for (int i = 0; i < JAVA_THREADS; i++) {
            long n = java.get(i).get(MS + 30_000, TimeUnit.MILLISECONDS);
            counts.append(String.format("java%d=%d ", i, n));
            assertTrue(n > 0, "Java thread " + i + " never acquired the lock");
            total += n;
        }
        for (int a = 0; a < actors.length; a++) {
            for (int t = 0; t < C_THREADS; t++) {
                Actor.Reply r = actors[a].await(t, MS + 30_000);
                assertEquals("OK", r.status(), "C process " + a + " thread " + t);
                counts.append(String.format("c%d.%d=%d ", a, t, r.value()));
                assertTrue(r.value() > 0, "C process " + a + " thread " + t + " never acquired the lock");
                total += r.value();
            }
        }
        RBucket<String> bucket = redisson.getBucket(counter, StringCodec.INSTANCE);
        long value = Long.parseLong(bucket.get());
        Interop.report("stress %d s (local_handoffs c0 0, c1 %d): counter %d, acquisitions %d (%.0f/s): %s",
                MS / 1000, secondHandoffs, value, total, total * 1000.0 / MS, counts.toString().trim());
        assertEquals(total, value, "lost increments: two holders overlapped");
        assertFalse(redisson.getLock(name).isLocked(), "the lock was left held");
    }

    /** One Java thread's loop; returns its iterations. */
    private static long javaLoop(String name, String counter) {
        return Interop.loopUnder(redisson.getLock(name), redisson, counter, MS, Interop::increment);
    }
}
