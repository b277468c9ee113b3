// SPDX-License-Identifier: BSD-3-Clause
package rlock.interop;

import java.time.Instant;
import java.util.Map;
import java.util.function.Consumer;
import java.util.concurrent.atomic.AtomicInteger;

import org.redisson.Redisson;
import org.redisson.api.RBucket;
import org.redisson.api.RLock;
import org.redisson.api.RMap;
import org.redisson.api.RedissonClient;
import org.redisson.client.codec.StringCodec;
import org.redisson.config.Config;

/** Shared set-up: where Redis and the actor are, and small helpers. */
final class Interop {
    /** Set by test/redisson/run.sh (via scripts/with-redis.sh). */
    static final String URL = env("RLOCK_TEST_URL");
    static final String ACTOR = env("RLOCK_ACTOR");
    /** Keeps names unique between runs against the same server (3.x then 4.x). */
    private static final String RUN = Long.toString(System.currentTimeMillis() % 100000);
    private static final AtomicInteger SEQ = new AtomicInteger();

    private Interop() {
    }

    private static String env(String name) {
        String v = System.getenv(name);
        if (v == null || v.isEmpty())
            throw new IllegalStateException(name + " is not set: run make test-redisson");
        return v;
    }

    /** A Redisson client on the test server, single-server mode, classic pub/sub. */
    static RedissonClient redisson(long lockWatchdogTimeoutMs) {
        Config config = new Config();
        config.useSingleServer().setAddress(URL);
        config.setLockWatchdogTimeout(lockWatchdogTimeoutMs);
        return Redisson.create(config);
    }

    /** A lock name no other test uses: base + "/" + run + "." + sequence. */
    static String name(String base) {
        return base + "/" + RUN + "." + SEQ.incrementAndGet();
    }

    /** Redisson's unlock channel for a lock name (research/redisson.md section 3.1). */
    static String channel(String name) {
        return name.contains("{") ? "redisson_lock__channel:" + name
                                  : "redisson_lock__channel:{" + name + "}";
    }

    /** Wall-clock microseconds: the actors stamp their replies with CLOCK_REALTIME. */
    static long nowUs() {
        Instant i = Instant.now();
        return i.getEpochSecond() * 1_000_000 + i.getNano() / 1000;
    }

    /** The raw lock hash (HGETALL), as strings. */
    static Map<String, String> hash(RedissonClient r, String name) {
        RMap<String, String> map = r.getMap(name, StringCodec.INSTANCE);
        return map.readAllMap();
    }

    /** Waits until at least n clients subscribe to the lock's channel (PUBSUB NUMSUB). */
    static void awaitSubscribers(RedissonClient r, String name, int n) throws InterruptedException {
        long end = System.currentTimeMillis() + 5000;
        while (r.getTopic(channel(name), StringCodec.INSTANCE).countSubscribers() < n) {
            if (System.currentTimeMillis() > end)
                throw new AssertionError("nobody subscribed to " + channel(name) + " within 5 s");
            Thread.sleep(5);
        }
    }


    /**
     * A stress loop: for ms, takes lock, hands the counter's bucket to body, unlocks;
     * returns the iterations.
     */
    static long loopUnder(RLock lock, RedissonClient r, String counter, long ms,
            Consumer<RBucket<String>> body) {
        RBucket<String> bucket = r.getBucket(counter, StringCodec.INSTANCE);
        long end = System.currentTimeMillis() + ms, n = 0;
        while (System.currentTimeMillis() < end) {
            lock.lock();
            try {
                body.accept(bucket);
                n++;
            } finally {
                lock.unlock();
            }
        }
        return n;
    }

    /** The stress loops' write: the counter + 1. */
    static void increment(RBucket<String> bucket) {
        String v = bucket.get();
        bucket.set(Long.toString(v == null ? 1 : Long.parseLong(v) + 1));
    }

    /** One line of the figures the suite reports, tagged with the Redisson version. */
    static void report(String format, Object... args) {
        System.out.printf("[redisson %s] %s%n", System.getProperty("redisson.version", "?"),
                String.format(format, args));
    }
}
