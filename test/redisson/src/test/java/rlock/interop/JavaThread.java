// SPDX-License-Identifier: BSD-3-Clause
package rlock.interop;

import java.util.concurrent.Callable;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

/**
 * One Java thread that runs what it is given, in order. Redisson's owner is
 * "<client id>:<thread id>", so a lock taken in here must be released in here.
 */
final class JavaThread implements AutoCloseable {
    private final ExecutorService exec = Executors.newSingleThreadExecutor();

    <T> Future<T> submit(Callable<T> task) {
        return exec.submit(task);
    }

    <T> T call(Callable<T> task) throws Exception {
        return exec.submit(task).get(15, TimeUnit.SECONDS);
    }

    void run(Runnable task) throws Exception {
        call(() -> {
            task.run();
            return null;
        });
    }

    /** Thread.getId() of this thread (Redisson's thread id). */
    long id() throws Exception {
        return call(() -> Thread.currentThread().getId());
    }

    @Override
    public void close() {
        exec.shutdownNow();
    }
}
