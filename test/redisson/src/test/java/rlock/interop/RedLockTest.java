// SPDX-License-Identifier: BSD-3-Clause
package rlock.interop;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.redisson.Redisson;
import org.redisson.RedissonRedLock;
import org.redisson.api.RLock;
import org.redisson.api.RedissonClient;
import org.redisson.config.Config;

/**
 * rlock's Redlock (rlock_redlock_*) beside Redisson's RedissonRedLock over
 * the same name on the same three masters (the test server and two
 * redis-servers of this class's own): each master holds Redisson's RLock
 * hash, written by the client of that master, so each side's Redlock
 * excludes the other's, and a quorum counts holds of both kinds.
 */
@SuppressWarnings("deprecation") // RedissonRedLock: the interop is the point
class RedLockTest extends InteropTest {
    private static final List<Process> servers = new ArrayList<>();
    private static final List<Path> dirs = new ArrayList<>();
    /** The masters: Interop.URL, then the two of our own. */
    private static final List<String> urls = new ArrayList<>();
    private static final List<RedissonClient> clients = new ArrayList<>();

    @BeforeAll
    static void startMasters() throws Exception {
        urls.add(Interop.URL);
        clients.add(redisson);
        for (int i = 0; i < 2; i++) {
            int port;
            try (ServerSocket s = new ServerSocket(0)) {
                port = s.getLocalPort();
            }
            Path dir = Files.createTempDirectory("rlock-redlock");
            dirs.add(dir);
            servers.add(new ProcessBuilder("redis-server", "--port", Integer.toString(port),
                    "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir",
                    dir.toString()).redirectErrorStream(true)
                    .redirectOutput(dir.resolve("log").toFile()).start());
            awaitPing(port);
            String url = "redis://127.0.0.1:" + port;
            urls.add(url);
            Config config = new Config();
            config.useSingleServer().setAddress(url);
            clients.add(Redisson.create(config));
        }
    }

    private static void awaitPing(int port) throws Exception {
        long end = System.currentTimeMillis() + 10_000;
        while (true) {
            try (Socket s = new Socket("127.0.0.1", port)) {
                OutputStream out = s.getOutputStream();
                out.write("PING\r\n".getBytes(StandardCharsets.US_ASCII));
                out.flush();
                InputStream in = s.getInputStream();
                byte[] buf = new byte[7];
                if (in.read(buf) > 0 && new String(buf, StandardCharsets.US_ASCII).startsWith("+PONG"))
                    return;
            } catch (IOException e) {
                if (System.currentTimeMillis() > end)
                    throw new AssertionError("redis-server on port " + port + " did not start", e);
            }
            Thread.sleep(20);
        }
    }

    @AfterAll
    static void stopMasters() throws Exception {
        for (int i = 1; i < clients.size(); i++)
            clients.get(i).shutdown();
        for (Process p : servers) {
            p.destroyForcibly();
            p.waitFor(5, TimeUnit.SECONDS);
        }
        for (Path d : dirs) {
            try (var files = Files.list(d)) {
                for (Path f : (Iterable<Path>) files::iterator)
                    Files.deleteIfExists(f);
            }
            Files.deleteIfExists(d);
        }
        clients.clear();
        urls.clear();
    }

    private Actor cActor() throws IOException {
        return actor(30_000, 4, urls.get(1) + "," + urls.get(2));
    }

    private static RedissonRedLock javaRedLock(String name) {
        return new RedissonRedLock(clients.get(0).getLock(name), clients.get(1).getLock(name),
                clients.get(2).getLock(name));
    }

    /** C's Redlock writes Redisson's hash on every master; Java's RedissonRedLock waits for it. */
    @Test
    void cHoldsJavaRedLockExcluded() throws Exception {
        Actor c = cActor();
        String name = Interop.name("redlock-c");
        Actor.Reply got = c.call(0, "redlock 10000 0 " + name);
        assertEquals("OK", got.status());
        assertTrue(got.value() > 0 && got.value() <= 10_000 - 102, "validity " + got.value());
        for (int i = 0; i < 3; i++) {
            Map<String, String> hash = Interop.hash(clients.get(i), name);
            assertEquals(1, hash.size(), hash.toString());
            assertEquals("1", hash.values().iterator().next());
            long ttl = clients.get(i).getLock(name).remainTimeToLive();
            assertTrue(ttl > 9_000 && ttl <= 10_000, "master " + i + " ttl " + ttl);
        }
        assertTrue(Interop.hash(clients.get(0), name).keySet().iterator().next().startsWith(c.clientId + ":"));
        RedissonRedLock java = javaRedLock(name);
        try (JavaThread j = javaThread()) {
            assertFalse(j.call(() -> java.tryLock(0, 10_000, TimeUnit.MILLISECONDS)));
            for (int i = 0; i < 3; i++) // Java gave back nothing of C's, took nothing
                assertEquals(1, Interop.hash(clients.get(i), name).size());
            assertEquals("OK", c.call(0, "redunlock " + name).status());
            assertTrue(j.call(() -> java.tryLock(1000, 10_000, TimeUnit.MILLISECONDS)));
            Interop.report("C Redlock held: Java RedissonRedLock tryLock false; after C's unlock: true");
            j.run(java::unlock);
        }
    }

    /** Java's RedissonRedLock holds: C's Redlock is BUSY until Java unlocks. */
    @Test
    void javaHoldsCRedlockBusy() throws Exception {
        Actor c = cActor();
        String name = Interop.name("redlock-j");
        RedissonRedLock java = javaRedLock(name);
        try (JavaThread j = javaThread()) {
            assertTrue(j.call(() -> java.tryLock(0, 10_000, TimeUnit.MILLISECONDS)));
            for (int i = 0; i < 3; i++)
                assertEquals(1, Interop.hash(clients.get(i), name).size());
            assertEquals("BUSY", c.call(0, "redlock 10000 200 " + name).status());
            j.run(java::unlock);
        }
        Actor.Reply got = c.call(0, "redlock 10000 0 " + name);
        assertEquals("OK", got.status());
        Interop.report("Java RedissonRedLock held: C Redlock BUSY; after Java's unlock: OK, validity %d ms", got.value());
        assertEquals("OK", c.call(0, "redunlock " + name).status());
        for (int i = 0; i < 3; i++)
            assertTrue(Interop.hash(clients.get(i), name).isEmpty());
    }

    /** A quorum counts both sides' holds: a Java RLock on one master leaves C two of three. */
    @Test
    void quorumAcrossSides() throws Exception {
        Actor c = cActor();
        String name = Interop.name("redlock-q");
        RLock third = clients.get(2).getLock(name);
        try (JavaThread plain = javaThread(); JavaThread other = javaThread()) {
            plain.run(third::lock);
            assertEquals("OK", c.call(0, "redlock 10000 0 " + name).status());
            assertTrue(Interop.hash(clients.get(0), name).keySet().iterator().next().startsWith(c.clientId + ":"));
            RedissonRedLock java = javaRedLock(name);
            // C holds 2 of 3, Java's plain lock the third: nobody else has a quorum.
            assertFalse(other.call(() -> java.tryLock(0, 10_000, TimeUnit.MILLISECONDS)));
            assertEquals("OK", c.call(0, "redunlock " + name).status());
            plain.run(third::unlock);
        }
    }
}
