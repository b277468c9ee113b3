// SPDX-License-Identifier: BSD-3-Clause
package rlock.interop;

import java.io.IOException;
import java.util.ArrayList;
import java.util.List;

import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.redisson.api.RedissonClient;

/**
 * Base of every test class: one Redisson client with the default watchdog
 * (30 s) for the class, and the actors a test starts, stopped after it even
 * when it fails.
 */
abstract class InteropTest {
    static RedissonClient redisson;
    private final List<AutoCloseable> resources = new ArrayList<>();

    @BeforeAll
    static void openRedisson() {
        redisson = Interop.redisson(30_000);
    }

    @AfterAll
    static void closeRedisson() {
        redisson.shutdown();
    }

    /** An actor stopped after the test: watchdog_timeout_ms, local_handoffs. */
    Actor actor(long watchdogMs, int localHandoffs) throws IOException {
        Actor a = new Actor(watchdogMs, localHandoffs);
        resources.add(a);
        return a;
    }

    /** An actor with clients on more masters too (its Redlock's), stopped after the test. */
    Actor actor(long watchdogMs, int localHandoffs, String moreUrls) throws IOException {
        Actor a = new Actor(watchdogMs, localHandoffs, moreUrls);
        resources.add(a);
        return a;
    }

    /** A Java thread stopped after the test. */
    JavaThread javaThread() {
        JavaThread t = new JavaThread();
        resources.add(t);
        return t;
    }

    @AfterEach
    void stopAll() throws Exception {
        for (AutoCloseable r : resources)
            r.close();
        resources.clear();
    }
}
