// SPDX-License-Identifier: BSD-3-Clause
package rlock.interop;

import java.io.FileWriter;
import java.io.IOException;
import java.io.PrintWriter;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteOrder;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.TimeUnit;
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
 *   handoff: bench_rlock handoff's protocol (test/bench/rlock/handoff.c),
 *     the two parties each with a RedissonClient of its own, the second one
 *     in another JVM (this class's main(); state shared through a mapped
 *     file) or in a thread of this JVM: for hand-off i, party i % 2 announces itself
 *     and calls lock(); the holder waits for the announcement plus 1 ms
 *     (settle: the waiter is subscribed and parked), stamps System.nanoTime()
 *     and calls unlock(); the waiter's latency is its lock() return time minus
 *     the stamp. The releaser then waits (polling every 0.5 ms) for the waiter
 *     to report the lock before it turns waiter. The first WARMUP_HANDOFFS
 *     hand-offs of the run are not recorded (JIT).
 */
public class RedissonBench {
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
        lines.add(handoff(false, true));
        lines.add(handoff(true, true));
        lines.add(handoff(false, false));
        lines.add(handoff(true, false));
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

    /**
     * What the two parties share (handoff_shm in handoff.c): longs in a file
     * mapped by both, so that the second party can be another JVM. Slots:
     * 0, 1 ready flags of party 0 and 1; 2 waiting; 3 got; 4 errors;
     * 5 releasedNs (System.nanoTime: CLOCK_MONOTONIC, one clock for all
     * processes on Linux); 8.. the latencies.
     */
    private static final class Shared implements AutoCloseable {
        static final int WAITING = 2, GOT = 3, ERRORS = 4, RELEASED = 5, LAT = 8;
        private static final VarHandle LONGS =
                MethodHandles.byteBufferViewVarHandle(long[].class, ByteOrder.nativeOrder());
        private final FileChannel ch;
        private final MappedByteBuffer buf;

        Shared(Path file, int n) throws IOException {
            ch = FileChannel.open(file, StandardOpenOption.CREATE, StandardOpenOption.READ,
                    StandardOpenOption.WRITE);
            buf = ch.map(FileChannel.MapMode.READ_WRITE, 0, 8L * (LAT + n));
        }

        long get(int slot) {
            return (long) LONGS.getVolatile(buf, slot * 8);
        }

        void set(int slot, long v) {
            LONGS.setVolatile(buf, slot * 8, v);
        }

        void error() {
            LONGS.getAndAdd(buf, ERRORS * 8, 1L);
        }

        @Override
        public void close() throws IOException {
            ch.close();
        }
    }

    private static void sleepNs(long ns) {
        LockSupport.parkNanos(ns);
    }

    /** One party of n hand-offs (handoff_main in handoff.c). */
    static void party(Shared sh, RLock lock, int me, int n) {
        try {
            if (me == 1)
                lock.lock();
            sh.set(me, 1);
            long end = System.nanoTime() + 60_000_000_000L;
            while (sh.get(1 - me) == 0 && sh.get(Shared.ERRORS) == 0) {
                if (System.nanoTime() > end)
                    throw new IllegalStateException("the other party did not start within 60 s");
                sleepNs(200_000);
            }
            for (int i = 0; i < n && sh.get(Shared.ERRORS) == 0; i++) {
                if (i % 2 == me) {
                    sh.set(Shared.WAITING, i + 1);
                    lock.lock();
                    sh.set(Shared.LAT + i, System.nanoTime() - sh.get(Shared.RELEASED));
                    sh.set(Shared.GOT, i + 1);
                } else {
                    while (sh.get(Shared.WAITING) != i + 1 && sh.get(Shared.ERRORS) == 0)
                        sleepNs(20_000);
                    sleepNs(SETTLE_NS);
                    sh.set(Shared.RELEASED, System.nanoTime());
                    lock.unlock();
                    while (sh.get(Shared.GOT) != i + 1 && sh.get(Shared.ERRORS) == 0)
                        sleepNs(500_000);
                }
            }
            if ((n - 1) % 2 == me && sh.get(Shared.ERRORS) == 0)
                lock.unlock();
        } catch (Throwable e) {
            System.err.println("redisson handoff party " + me + ": " + e);
            sh.error();
        }
    }

    /**
     * The second party in a JVM of its own: java -cp ... rlock.interop.RedissonBench
     * FILE NAME fair|plain N (started by handoffRun).
     */
    public static void main(String[] args) throws Exception {
        int n = Integer.parseInt(args[3]);
        RedissonClient r = client(0);
        try (Shared sh = new Shared(Path.of(args[0]), n)) {
            RLock lock = args[2].equals("fair") ? r.getFairLock(args[1]) : r.getLock(args[1]);
            party(sh, lock, 1, n);
            System.exit(sh.get(Shared.ERRORS) == 0 ? 0 : 1);
        } finally {
            r.shutdown();
        }
    }

    private static String classPath() {
        String cp = System.getProperty("surefire.test.class.path");
        return cp != null && !cp.isEmpty() ? cp : System.getProperty("java.class.path");
    }

    /** n hand-offs; returns their latencies (ns) after the first skip, and adds errors. */
    private static long[] handoffRun(boolean fair, boolean twoJvms, int n, int skip, long[] errors)
            throws Exception {
        String name = "bench:redisson:" + (fair ? "fairhandoff:" : "handoff:") + RUN + ":"
                + (twoJvms ? "jvms" : "clients");
        Path file = Files.createTempFile("rlock-redisson-handoff", ".shm");
        RedissonClient a = client(0), b = twoJvms ? null : client(0);
        Process child = null;
        try (Shared sh = new Shared(file, n)) {
            RLock la = fair ? a.getFairLock(name) : a.getLock(name);
            Thread t1 = null;
            if (twoJvms) {
                String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
                child = new ProcessBuilder(java, "-cp", classPath(),
                        "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", RedissonBench.class.getName(),
                        file.toString(), name, fair ? "fair" : "plain", Integer.toString(n))
                        .inheritIO().start();
            } else {
                RLock lb = fair ? b.getFairLock(name) : b.getLock(name);
                t1 = new Thread(() -> party(sh, lb, 1, n), "party-1");
                t1.start();
            }
            party(sh, la, 0, n);
            if (t1 != null)
                t1.join();
            if (child != null && (!child.waitFor(60, TimeUnit.SECONDS) || child.exitValue() != 0)) {
                System.err.println("redisson handoff: the second JVM failed");
                sh.error();
            }
            errors[0] += sh.get(Shared.ERRORS);
            long[] lat = new long[Math.max(0, n - skip)];
            for (int i = skip; i < n; i++)
                lat[i - skip] = sh.get(Shared.LAT + i);
            return lat;
        } finally {
            if (child != null)
                child.destroyForcibly();
            a.shutdown();
            if (b != null)
                b.shutdown();
            Files.deleteIfExists(file);
        }
    }

    private String handoff(boolean fair, boolean twoJvms) throws Exception {
        String kind = fair ? "fair" : "rlock";
        String where = twoJvms ? "process" : "client";
        System.err.printf("redisson handoff (%s lock): %d warm-up + %d hand-offs between %s"
                + " (settle 1000 us)%n", fair ? "fair" : "plain", WARMUP_HANDOFFS, HANDOFFS,
                twoJvms ? "two JVMs" : "two RedissonClients of one JVM");
        long[] errors = {0};
        long t0 = System.nanoTime();
        long[] lat = handoffRun(fair, twoJvms, WARMUP_HANDOFFS + HANDOFFS, WARMUP_HANDOFFS, errors);
        double secs = (System.nanoTime() - t0) / 1e9;
        Arrays.sort(lat);
        return String.format(Locale.ROOT,
                "{\"bench\":\"redisson_handoff\",\"redisson\":\"%s\",\"kind\":\"%s\",\"waiter\":\"%s\","
                        + "\"handoffs\":%d,\"warmup_handoffs\":%d,\"settle_us\":1000,\"p50_ms\":%.6g,"
                        + "\"p90_ms\":%.6g,\"p99_ms\":%.6g,\"max_ms\":%.6g,\"run_s\":%.6g,\"errors\":%d}",
                version(), kind, where, lat.length, WARMUP_HANDOFFS, pct(lat, 50), pct(lat, 90), pct(lat, 99),
                pct(lat, 100), secs, errors[0]);
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
