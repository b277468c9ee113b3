/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * bench_cycles.c - a fixed number of uncontended rlock_lock + rlock_unlock
 * cycles on one name, inside one function (cycles), for an instruction
 * count under valgrind --tool=callgrind --toggle-collect=cycles: the client's
 * cost per cycle, repeatable to the instruction even on a loaded machine
 * (test/bench/callgrind.sh runs it twice and divides the difference).
 *
 *   bench_cycles [--url URL] [-n CYCLES] [--register 0|1]
 *
 * 200 cycles warm up first (counted too: the difference of two runs removes
 * them). Exits 1 if a call fails.
 */
#include <getopt.h>

#include "bench/bench.h"
#include "rlock.h"

/* Not inlined: callgrind counts what runs below this frame only. */
__attribute__((noinline)) static int cycles(rlock *lock, long n) {
    for (long i = 0; i < n; i++)
        if (rlock_lock(lock) != RLOCK_OK || rlock_unlock(lock) != RLOCK_OK)
            return -1;
    return 0;
}

int main(int argc, char **argv) {
    static const struct option longopts[] = {{"url", required_argument, NULL, 'u'},
                                              {"register", required_argument, NULL, 'R'},
                                              {NULL, 0, NULL, 0}};
    const char *url = default_url();
    long n = 2000;
    int reg = -1, ch;
    while ((ch = getopt_long(argc, argv, "n:", longopts, NULL)) != -1) {
        switch (ch) {
        case 'u': url = optarg; break;
        case 'n': n = (long)arg_num("-n", optarg, 1, 1e9); break;
        case 'R': reg = (int)arg_num("--register", optarg, 0, 1); break;
        default:
            fprintf(stderr, "usage: bench_cycles [--url URL] [-n CYCLES] [--register 0|1]\n");
            return 2;
        }
    }
    rlock_config cfg;
    rlock_client *client = NULL;
    rlock *lock = NULL;
    rlock_config_init(&cfg);
    cfg.url = url;
    if (reg >= 0)
        cfg.register_client = reg;
    int rc = rlock_client_open(&cfg, &client);
    if (rc == RLOCK_OK)
        rc = rlock_get(client, "bench:cycles", &lock);
    if (rc == RLOCK_OK && (cycles(lock, 200) != 0 || cycles(lock, n) != 0))
        rc = RLOCK_EIO;
    if (rc != RLOCK_OK)
        fprintf(stderr, "bench_cycles: %s: %s\n", rlock_status_name(rc), rlock_last_error());
    rlock_free(lock);
    rlock_client_close(client);
    return rc == RLOCK_OK ? 0 : 1;
}
