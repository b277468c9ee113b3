/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_api_status.c - the API's fixed tables (include/rlock.h): the version
 * macros and functions, every status code's name and message, and what an
 * unknown status gives.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness.h"

/* ---- version, status codes -------------------------------------------- */

static void test_version(void **state) {
    (void)state;
    assert_non_null(rlock_version());
    assert_string_equal(rlock_version(), RLOCK_VERSION_STRING);
    assert_int_equal(rlock_version_num(), RLOCK_VERSION_NUM);
    assert_int_equal(RLOCK_VERSION_NUM, (RLOCK_VERSION_MAJOR << 16) |
                                            (RLOCK_VERSION_MINOR << 8) |
                                            RLOCK_VERSION_PATCH);
}

struct status_row {
    int value;
    const char *name;
    const char *msg;
};

#define STATUS_ROW(n, v, m) {v, "RLOCK_" #n, m},
static const struct status_row status_rows[] = {RLOCK_STATUS_MAP(STATUS_ROW)};

static void test_status_table(void **state) {
    size_t i, j;
    (void)state;
    /* The #defines agree with the table. */
    assert_int_equal(RLOCK_OK, 0);
    assert_int_equal(RLOCK_BUSY, 1);
    assert_true(RLOCK_EINVAL < 0 && RLOCK_ENOTOWNER < 0 && RLOCK_EIO < 0 &&
                RLOCK_EREDIS < 0 && RLOCK_ENOMEM < 0 && RLOCK_ECLOSED < 0);
    for (i = 0; i < sizeof status_rows / sizeof status_rows[0]; i++) {
        const struct status_row *r = &status_rows[i];
        const char *msg = rlock_strerror(r->value);
        const char *name = rlock_status_name(r->value);
        assert_non_null(msg);
        assert_non_null(name);
        assert_string_equal(msg, r->msg);
        assert_string_equal(name, r->name);
        /* Static: the same pointer every time. */
        assert_ptr_equal(rlock_strerror(r->value), msg);
        assert_ptr_equal(rlock_status_name(r->value), name);
        for (j = 0; j < i; j++)
            assert_int_not_equal(status_rows[j].value, r->value);
    }
    assert_string_equal(rlock_status_name(RLOCK_OK), "RLOCK_OK");
    assert_string_equal(rlock_status_name(RLOCK_BUSY), "RLOCK_BUSY");
    assert_string_equal(rlock_status_name(RLOCK_EINVAL), "RLOCK_EINVAL");
    assert_string_equal(rlock_status_name(RLOCK_ENOTOWNER), "RLOCK_ENOTOWNER");
    assert_string_equal(rlock_status_name(RLOCK_EIO), "RLOCK_EIO");
    assert_string_equal(rlock_status_name(RLOCK_EREDIS), "RLOCK_EREDIS");
    assert_string_equal(rlock_status_name(RLOCK_ENOMEM), "RLOCK_ENOMEM");
    assert_string_equal(rlock_status_name(RLOCK_ECLOSED), "RLOCK_ECLOSED");
    assert_string_equal(rlock_status_name(RLOCK_ELOST), "RLOCK_ELOST");
    assert_string_equal(rlock_status_name(RLOCK_ENOTLOCK), "RLOCK_ENOTLOCK");
    assert_string_equal(rlock_status_name(RLOCK_EAUTH), "RLOCK_EAUTH");
    assert_string_equal(rlock_status_name(RLOCK_ENOPERM), "RLOCK_ENOPERM");
    assert_string_equal(rlock_status_name(RLOCK_ENOREPL), "RLOCK_ENOREPL");
    assert_string_equal(rlock_status_name(RLOCK_EDEADLK), "RLOCK_EDEADLK");
    assert_int_equal(RLOCK_EDEADLK, -12);
    assert_string_equal(rlock_status_name(RLOCK_ESTALE), "RLOCK_ESTALE");
    assert_int_equal(RLOCK_ESTALE, -13);
}

static void test_status_unknown(void **state) {
    static const int unknown[] = {2, 3, 100, -14, -100, 12345, INT_MAX, INT_MIN, INT_MIN + 1};
    size_t i;
    (void)state;
    for (i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
        const char *msg = rlock_strerror(unknown[i]);
        const char *name = rlock_status_name(unknown[i]);
        assert_non_null(msg);
        assert_non_null(name);
        assert_string_equal(msg, "unknown rlock status");
        assert_string_equal(name, "RLOCK_UNKNOWN");
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_version),
        cmocka_unit_test(test_status_table),
        cmocka_unit_test(test_status_unknown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
