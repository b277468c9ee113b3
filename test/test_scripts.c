/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_scripts.c - every Lua script's SHA1, pinned. A script's SHA1 is what
 * EVALSHA names it by: in every server's script cache, and in what Java
 * Redisson peers and rlock clients of other versions running beside this one
 * load (docs/design.md section 3, "What changes a script's SHA1"). A change
 * of a script's text, a byte of whitespace included, is a new SHA1; this
 * test makes such a change deliberate: whoever changes a script updates its
 * line here, in the same commit, and says why.
 *
 * The SHA1 is the server's own (SCRIPT LOAD of the library's text, as
 * net/script.c loads it), so what is pinned is exactly what EVALSHA sends.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include "harness.h"
#include "kind/kind.h"

static const struct {
    int script;
    const char *name;
    const char *sha1;
} pinned[] = {
    {RLOCK__SCRIPT_ACQUIRE, "ACQUIRE", "dd40e00cf72e7c6f369fa74e10aee3de5d72c62d"},
    {RLOCK__SCRIPT_RELEASE, "RELEASE", "3658534d5333578d57807d236a379f373974de55"},
    {RLOCK__SCRIPT_TRANSFER, "TRANSFER", "54bc590f67031d43651ac85b14706d3b3c5fef50"},
    {RLOCK__SCRIPT_RENEW, "RENEW", "77e40bda2c4633d6666451f5e25bfc3c70cdcc49"},
    {RLOCK__SCRIPT_RENEW_NODE, "RENEW_NODE", "242cb9f25e6dd91169a71886cec29ca12a6ca18e"},
    {RLOCK__SCRIPT_FORCE_UNLOCK, "FORCE_UNLOCK", "93738bd4a1786aeb9d33fc7fc4c3581fd0fdb210"},
    {RLOCK__SCRIPT_FAIR_ACQUIRE, "FAIR_ACQUIRE", "a49cc389adea250524b213abc26df3324a6a18d4"},
    {RLOCK__SCRIPT_FAIR_RELEASE, "FAIR_RELEASE", "987feb8fa3f9f3155622ce5012d1dff1c2e2b4c7"},
    {RLOCK__SCRIPT_FAIR_LEAVE, "FAIR_LEAVE", "29d64b55a9298638395c41d76161f543b03dfe68"},
    {RLOCK__SCRIPT_FAIR_FORCE_UNLOCK, "FAIR_FORCE_UNLOCK", "b8588e6687d194719c0236f47550e5553867cfb7"},
    {RLOCK__SCRIPT_FENCED_SET, "FENCED_SET", "ce6fcb883d086c50164e7c347d9518e9f11576c1"},
    {RLOCK__SCRIPT_RW_READ_ACQUIRE, "RW_READ_ACQUIRE", "9bd348aef26c49080a39634e36dc3010cfb31b4b"},
    {RLOCK__SCRIPT_RW_WRITE_ACQUIRE, "RW_WRITE_ACQUIRE", "e6f8ec94b36353dc93e2df0167d613120afbc3db"},
    {RLOCK__SCRIPT_RW_READ_RELEASE, "RW_READ_RELEASE", "6fd5ebdcb2a2529a3f54f336a9cd7f459d2c98cc"},
    {RLOCK__SCRIPT_RW_WRITE_RELEASE, "RW_WRITE_RELEASE", "210c23a833d9515694c5d81d0af6d0bec997f106"},
    {RLOCK__SCRIPT_RW_FORCE_UNLOCK, "RW_FORCE_UNLOCK", "8b2bddf51c410d71c21bd183c5aad47d0e1cf67c"},
    {RLOCK__SCRIPT_RW_LOCKED, "RW_LOCKED", "7691049e5e5f7451ebf919e09dacf5f4a23eb4d8"},
    {RLOCK__SCRIPT_RW_RENEW, "RW_RENEW", "8acc417b453ea734f39ae4264707685c950d2d7f"},
    {RLOCK__SCRIPT_RW_RENEW_NODE, "RW_RENEW_NODE", "312dad20915d9f15a300b377f51a22e72c96fd17"},
    {RLOCK__SCRIPT_RW_WRITE_LEAVE, "RW_WRITE_LEAVE", "5d1f3c3c2f2f005f2c250869d84712f8d61f8334"},
    {RLOCK__SCRIPT_RW_READ_HOLDS, "RW_READ_HOLDS", "006c0efded49d643f8e8a2dec1534b9cf01b5557"},
};

/* Every script of the set is pinned, once, under its own name. */
static void test_every_script_pinned(void **state) {
    (void)state;
    assert_int_equal(sizeof(pinned) / sizeof(pinned[0]), RLOCK__SCRIPT_COUNT);
    for (size_t i = 0; i < sizeof(pinned) / sizeof(pinned[0]); i++) {
        assert_int_equal(pinned[i].script, (int)i);
        assert_string_equal(rlock__scripts[i].name, pinned[i].name);
        assert_ptr_equal(rlock__script_body((int)i), rlock__scripts[i].body);
    }
}

/* The server's SHA1 of each script's text is the pinned one. */
static void test_sha1_pinned(void **state) {
    (void)state;
    redisContext *r = h_redis();
    for (size_t i = 0; i < sizeof(pinned) / sizeof(pinned[0]); i++) {
        redisReply *reply = h_cmd(r, "SCRIPT LOAD %s", rlock__script_body(pinned[i].script));
        assert_int_equal(reply->type, REDIS_REPLY_STRING);
        if (strcmp(reply->str, pinned[i].sha1) != 0)
            fail_msg("%s: SHA1 %s, pinned %s: a script's text changed (see the top of this file)",
                     pinned[i].name, reply->str, pinned[i].sha1);
        freeReplyObject(reply);
    }
    redisFree(r);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_script_pinned),
        cmocka_unit_test(test_sha1_pinned),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
