// SPDX-License-Identifier: BSD-3-Clause
package example;

import java.util.concurrent.TimeUnit;

import org.redisson.Redisson;
import org.redisson.api.RLock;
import org.redisson.api.RedissonClient;
import org.redisson.config.Config;

/**
 * The Java half of examples/turns.c: holds "example:turns" (plain) ROUNDS
 * times, then "example:turns-fair" (fair) ROUNDS times, 200 ms each, taking
 * turns with the C program on the same names.
 *
 * Usage: Main [URL [ROUNDS]] (default redis://127.0.0.1:6379, 3).
 */
public final class Main {
    static final long HOLD_MS = 200;
    static final long TURN_WAIT_MS = 30_000;

    public static void main(String[] args) throws InterruptedException {
        String url = args.length > 0 ? args[0] : "redis://127.0.0.1:6379";
        int rounds = args.length > 1 ? Integer.parseInt(args[1]) : 3;

        Config config = new Config();
        // The name its connections carry (CLIENT SETNAME): how rlockctl clients
        // tells this service's connections from the others.
        config.useSingleServer().setAddress(url).setClientName("example-java");
        RedissonClient redisson = Redisson.create(config);
        boolean ok;
        try {
            ok = takeTurns(redisson.getLock("example:turns"), rounds)
                    && takeTurns(redisson.getFairLock("example:turns-fair"), rounds);
        } finally {
            redisson.shutdown();
        }
        if (!ok)
            System.exit(1);
    }

    static boolean takeTurns(RLock lock, int rounds) throws InterruptedException {
        for (int i = 1; i <= rounds; i++) {
            long start = System.nanoTime();
            // The wait in milliseconds: a fair lock's tryLock(wait, unit) without
            // a lease queues with the wait read as milliseconds whatever the unit
            // (docs/redisson.md, "Fair lock").
            if (!lock.tryLock(TURN_WAIT_MS, TimeUnit.MILLISECONDS)) {
                System.err.printf("java: %s still busy after %d ms%n", lock.getName(), TURN_WAIT_MS);
                return false;
            }
            System.out.printf("java: holds %s (turn %d of %d, waited %d ms)%n", lock.getName(), i,
                    rounds, TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start));
            Thread.sleep(HOLD_MS);
            lock.unlock();
            if (i < rounds && !waitForOther(lock))
                return false;
        }
        return true;
    }

    // After our unlock, the C program's waiter takes the lock: wait for that, so
    // that the next tryLock queues behind it instead of taking the lock back.
    static boolean waitForOther(RLock lock) throws InterruptedException {
        long end = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(TURN_WAIT_MS);
        while (!lock.isLocked()) {
            if (System.nanoTime() >= end) {
                System.err.printf("java: nobody took a turn on %s in %d ms (is the C half running?)%n",
                        lock.getName(), TURN_WAIT_MS);
                return false;
            }
            Thread.sleep(10);
        }
        return true;
    }
}
