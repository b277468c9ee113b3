package rlock.interop;

import java.io.FileWriter;
import java.io.IOException;
import java.io.PrintWriter;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;

import org.junit.jupiter.api.Test;
import org.redisson.Redisson;
import org.redisson.api.RLock;
import org.redisson.api.RedissonClient;
import org.redisson.config.Config;

/**
 * The Java rows of `make bench-redisson` (test/redisson/bench.sh): Redisson's
 * RLock and fair lock measured the way test/bench/bench_rlock measures rlock,
 * against the redis-server at RLOCK_TEST_URL. Not a test: the class name does
 * not match surefire's default includes, so `mvn test` (make test-redisson)
 * skips it; bench.sh runs it with -Dtest=RedissonBench.
 *
 * One JSON line per row, in bench_rlock's format, goes to the file
 * RLOCK_BENCH_OUT (surefire may swallow stdout under -q):
 *   uncontended: T threads, each on its own lock name, lock() + unlock() in a
 *     loop on one RedissonClient (watchdog locks, as bench_rlock's default);
 *     WARMUP_S of warm-up (JIT), then ROUNDS rounds of SECS; cycles/s is the
 *     median of the rounds, p50/p99 over the cycles of all rounds.
 *   handoff: bench_rlock handoff's protocol (test/bench/rlock/handoff.c) with
 *     two RedissonClients (two connection sets and pub/sub connections, one
 *     JVM) as the two parties: for hand-off i, party i % 2 announces itself
 *     and calls lock(); the holder waits for the announcement plus 1 ms
 *     (settle: the waiter is subscribed and parked), stamps System.nanoTime()
 *     and calls unlock(); the waiter's latency is its lock() return time minus
 *     the stamp. The releaser then waits (polling every 0.5 ms) for the waiter
 *     to report the lock before it turns waiter. WARMUP_HANDOFFS hand-offs
 *     first are not recorded (JIT).
 */
class RedissonBench {
    private static final String URL = env("RLOCK_TEST_URL", null);
    private static final String OUT = env("RLOCK_BENCH_OUT", null);
    private static final double SECS = Double.parseDouble(env("RLOCK_BENCH_SECS", "1.5"));
    private static final int ROUNDS = Integer.parseInt(env("RLOCK_BENCH_ROUNDS", "3"));
    private static final double WARMUP_S = Double.parseDouble(env("RLOCK_BENCH_WARMUP_S", "3"));
    private static final int HANDOFFS = Integer.parseInt(env("RLOCK_BENCH_HANDOFFS", "2000"));
    private static final int WARMUP_HANDOFFS = Integer.parseInt(env("RLOCK_BENCH_WARMUP_HANDOFFS", "300"));
    private static final long SETTLE_NS = 1_000_000;
    private static final String RUN = Long.toString(System.currentTimeMillis() % 1000000);

    private static String env(String name, String dflt) {
        String v = System.getenv(name);
        if (v == null || v.isEmpty()) {
            if (dflt == null)
                throw new IllegalStateException(name + " is not set: run make bench-redisson");
            return dflt;
        }
        return v;
    }

    private static RedissonClient client(int poolSize) {
        Config config = new Config();
        config.useSingleServer().setAddress(URL).setConnectionPoolSize(Math.max(64, poolSize))
                .setConnectionMinimumIdleSize(Math.max(24, poolSize));
        return Redisson.create(config);
    }

    @Test
    void bench() throws Exception {
        List<String> lines = new ArrayList<>();
        lines.add(uncontended(1));
        lines.add(uncontended(8));
        lines.add(handoff(false));
        lines.add(handoff(true));
        try (PrintWriter w = new PrintWriter(new FileWriter(OUT))) {
            for (String l : lines)
                w.println(l);
        }
    }

    // ---- uncontended ---------------------------------------------------------

    private static final class Worker extends Thread {
        final RLock lock;
        final AtomicBoolean quit;
        volatile boolean recording;
        final AtomicLong cycles = new AtomicLong();
        long[] lat = new long[1 << 16];
        int n;
        volatile Throwable error;

        Worker(RLock lock, AtomicBoolean quit) {
            this.lock = lock;
            this.quit = quit;
            setDaemon(true);
        }

        @Override
        public void run() {
            try {
                while (!quit.get()) {
                    long t0 = System.nanoTime();
                    lock.lock();
                    lock.unlock();
                    long t1 = System.nanoTime();
                    cycles.incrementAndGet();
                    if (recording) {
                        if (n == lat.length)
                            lat = Arrays.copyOf(lat, 2 * n);
                        lat[n++] = t1 - t0;
                    }
                }
            } catch (Throwable e) {
                error = e;
            }
        }
    }

    private static long total(Worker[] ws) {
        long s = 0;
        for (Worker w : ws)
            s += w.cycles.get();
        return s;
    }

    private String uncontended(int threads) throws Exception {
        RedissonClient r = client(threads);
        try {
            AtomicBoolean quit = new AtomicBoolean();
            Worker[] ws = new Worker[threads];
            for (int i = 0; i < threads; i++)
                ws[i] = new Worker(r.getLock("bench:redisson:unc:" + RUN + ":" + threads + ":" + i), quit);
            System.err.printf("redisson uncontended: %d thread(s) on distinct locks, %.1f s warm-up,"
                    + " %d rounds of %.1f s%n", threads, WARMUP_S, ROUNDS, SECS);
            for (Worker w : ws)
                w.start();
            Thread.sleep((long) (WARMUP_S * 1000));
            for (Worker w : ws)
                w.recording = true;
            double[] rates = new double[ROUNDS];
            for (int k = 0; k < ROUNDS; k++) {
                long c0 = total(ws), t0 = System.nanoTime();
                Thread.sleep((long) (SECS * 1000));
                long c1 = total(ws), t1 = System.nanoTime();
                rates[k] = (c1 - c0) * 1e9 / (t1 - t0);
                System.err.printf(Locale.ROOT, "  round %d: %.0f cycles/s%n", k + 1, rates[k]);
            }
            for (Worker w : ws)
                w.recording = false;
            quit.set(true);
            int errors = 0;
            for (Worker w : ws) {
                w.join(10_000);
                if (w.error != null) {
                    System.err.println("redisson uncontended: " + w.error);
                    errors++;
                }
            }
            int n = 0;
            for (Worker w : ws)
                n += w.n;
            long[] all = new long[n];
            int off = 0;
            for (Worker w : ws) {
                System.arraycopy(w.lat, 0, all, off, w.n);
                off += w.n;
            }
            Arrays.sort(all);
            Arrays.sort(rates);
            double median = ROUNDS % 2 == 1 ? rates[ROUNDS / 2]
                                            : (rates[ROUNDS / 2 - 1] + rates[ROUNDS / 2]) / 2;
            return String.format(Locale.ROOT,
                    "{\"bench\":\"redisson_uncontended\",\"redisson\":\"%s\",\"threads\":%d,"
                            + "\"ops_per_s\":%.6g,\"p50_ms\":%.6g,\"p99_ms\":%.6g,\"cycles\":%d,"
                            + "\"rounds\":%d,\"round_s\":%.6g,\"warmup_s\":%.6g,\"errors\":%d}",
                    version(), threads, median, pct(all, 50), pct(all, 99), n, ROUNDS, SECS, WARMUP_S,
                    errors);
        } finally {
            r.shutdown();
        }
    }

    // ---- hand-off --------------------------------------------------------------

    /** What the two parties share (handoff_shm in handoff.c). */
    private static final class Shared {
        final AtomicLong waiting = new AtomicLong(), got = new AtomicLong(), errors = new AtomicLong();
        volatile long releasedNs;
        final long[] lat;

        Shared(int n) {
            lat = new long[n];
        }
    }

    private static void sleepNs(long ns) {
        LockSupport.parkNanos(ns);
    }

    private static void party(Shared sh, RLock lock, int me, int n, java.util.concurrent.CyclicBarrier go) {
        try {
            if (me == 1)
                lock.lock();
            go.await();
            for (int i = 0; i < n && sh.errors.get() == 0; i++) {
                if (i % 2 == me) {
                    sh.waiting.set(i + 1);
                    lock.lock();
                    sh.lat[i] = System.nanoTime() - sh.releasedNs;
                    sh.got.set(i + 1);
                } else {
                    while (sh.waiting.get() != i + 1 && sh.errors.get() == 0)
                        sleepNs(20_000);
                    sleepNs(SETTLE_NS);
                    sh.releasedNs = System.nanoTime();
                    lock.unlock();
                    while (sh.got.get() != i + 1 && sh.errors.get() == 0)
                        sleepNs(500_000);
                }
            }
            if ((n - 1) % 2 == me && sh.errors.get() == 0)
                lock.unlock();
        } catch (Throwable e) {
            System.err.println("redisson handoff party " + me + ": " + e);
            sh.errors.incrementAndGet();
        }
    }

    private static Shared handoffRun(boolean fair, int n, int seq) throws Exception {
        RedissonClient a = client(0), b = client(0);
        try {
            String name = "bench:redisson:" + (fair ? "fairhandoff:" : "handoff:") + RUN + ":" + seq;
            RLock la = fair ? a.getFairLock(name) : a.getLock(name);
            RLock lb = fair ? b.getFairLock(name) : b.getLock(name);
            Shared sh = new Shared(n);
            java.util.concurrent.CyclicBarrier go = new java.util.concurrent.CyclicBarrier(2);
            Thread t0 = new Thread(() -> party(sh, la, 0, n, go), "party-0");
            Thread t1 = new Thread(() -> party(sh, lb, 1, n, go), "party-1");
            t0.start();
            t1.start();
            t0.join();
            t1.join();
            return sh;
        } finally {
            a.shutdown();
            b.shutdown();
        }
    }

    private String handoff(boolean fair) throws Exception {
        String kind = fair ? "fair" : "rlock";
        System.err.printf("redisson handoff (%s lock): %d warm-up + %d hand-offs between two"
                + " RedissonClients (settle 1000 us)%n", fair ? "fair" : "plain", WARMUP_HANDOFFS, HANDOFFS);
        long errors = handoffRun(fair, WARMUP_HANDOFFS, 0).errors.get();
        long t0 = System.nanoTime();
        Shared sh = handoffRun(fair, HANDOFFS, 1);
        double secs = (System.nanoTime() - t0) / 1e9;
        errors += sh.errors.get();
        long[] lat = sh.lat.clone();
        Arrays.sort(lat);
        return String.format(Locale.ROOT,
                "{\"bench\":\"redisson_handoff\",\"redisson\":\"%s\",\"kind\":\"%s\",\"waiter\":\"client\","
                        + "\"handoffs\":%d,\"settle_us\":1000,\"p50_ms\":%.6g,\"p90_ms\":%.6g,"
                        + "\"p99_ms\":%.6g,\"max_ms\":%.6g,\"run_s\":%.6g,\"errors\":%d}",
                version(), kind, lat.length, pct(lat, 50), pct(lat, 90), pct(lat, 99), pct(lat, 100), secs,
                errors);
    }

    // ---- helpers -----------------------------------------------------------------

    /** Percentile p (nearest rank, like bench.h's samples_pct_ms) of sorted ns, in ms. */
    private static double pct(long[] sorted, double p) {
        if (sorted.length == 0)
            return Double.NaN;
        int rank = (int) Math.ceil(p / 100.0 * sorted.length);
        int idx = Math.min(sorted.length - 1, Math.max(0, rank - 1));
        return sorted[idx] / 1e6;
    }

    private static String version() {
        return System.getProperty("redisson.version", "?");
    }
}
