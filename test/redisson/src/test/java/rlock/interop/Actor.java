// SPDX-License-Identifier: BSD-3-Clause
package rlock.interop;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

/**
 * One C actor process (test/redisson/actors/rlock_actor.c): an rlock client
 * whose worker threads run the commands we send. Replies come back in
 * completion order, so a reader thread sorts them into one queue per worker
 * thread; send() and await() are separate so a test can leave a C thread
 * blocked in rlock_lock() while it acts on the Java side.
 */
final class Actor implements AutoCloseable {
    /** One reply line: "<thread> <status> <value> <start_us> <end_us>". */
    record Reply(int thread, String status, long value, long startUs, long endUs) {
        double ms() {
            return (endUs - startUs) / 1000.0;
        }
    }

    final String clientId;
    private final Process process;
    private final Writer in;
    private final Map<Integer, BlockingQueue<Reply>> replies = new ConcurrentHashMap<>();

    /** Starts an actor with the given rlock watchdog_timeout_ms and local_handoffs. */
    Actor(long watchdogMs, int localHandoffs) throws IOException {
        this(watchdogMs, localHandoffs, null);
    }

    /**
     * The same, with clients on more masters (comma-separated urls) for the
     * "redlock" and "redunlock" commands: a Redlock over Interop.URL and them.
     */
    Actor(long watchdogMs, int localHandoffs, String moreUrls) throws IOException {
        List<String> args = new ArrayList<>(List.of(Interop.ACTOR, Interop.URL,
                Long.toString(watchdogMs), Integer.toString(localHandoffs)));
        if (moreUrls != null)
            args.add(moreUrls);
        ProcessBuilder pb = new ProcessBuilder(args).redirectError(ProcessBuilder.Redirect.INHERIT);
        process = pb.start();
        in = new OutputStreamWriter(process.getOutputStream(), StandardCharsets.UTF_8);
        BufferedReader out = new BufferedReader(
                new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8));
        String ready = out.readLine();
        if (ready == null || !ready.startsWith("ready ")) {
            process.destroyForcibly();
            throw new IOException("actor did not start: " + ready);
        }
        clientId = ready.substring(6);
        Thread reader = new Thread(() -> {
            try {
                for (String line; (line = out.readLine()) != null; ) {
                    String[] f = line.split(" ");
                    Reply r = new Reply(Integer.parseInt(f[0]), f[1], Long.parseLong(f[2]),
                            Long.parseLong(f[3]), Long.parseLong(f[4]));
                    queue(r.thread()).add(r);
                }
            } catch (IOException | RuntimeException e) {
                System.err.println("actor reader: " + e);
            }
        }, "actor-reader");
        reader.setDaemon(true);
        reader.start();
    }

    private BlockingQueue<Reply> queue(int thread) {
        return replies.computeIfAbsent(thread, t -> new LinkedBlockingQueue<>());
    }

    /** Queues a command on C worker thread t; the name (if any) goes last. */
    void send(int t, String command) throws IOException {
        if (command.indexOf('\n') >= 0)
            throw new IllegalArgumentException("newline in command");
        in.write(t + " " + command + "\n");
        in.flush();
    }

    /** The next reply of C worker thread t, or an AssertionError after timeoutMs. */
    Reply await(int t, long timeoutMs) throws InterruptedException {
        Reply r = queue(t).poll(timeoutMs, TimeUnit.MILLISECONDS);
        if (r == null)
            throw new AssertionError("no reply from C thread " + t + " within " + timeoutMs + " ms");
        return r;
    }

    /** True if C worker thread t has not replied yet (it is still blocked). */
    boolean pending(int t) {
        return queue(t).isEmpty();
    }

    Reply call(int t, String command) throws IOException, InterruptedException {
        send(t, command);
        return await(t, 15_000);
    }

    /** EOF on stdin makes the actor close its client and exit; killed if it does not. */
    @Override
    public void close() throws InterruptedException {
        try {
            in.close();
        } catch (IOException ignored) {
            // already gone
        }
        if (!process.waitFor(5, TimeUnit.SECONDS)) {
            process.destroyForcibly();
            process.waitFor(5, TimeUnit.SECONDS);
        }
    }
}
