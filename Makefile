# SPDX-License-Identifier: BSD-3-Clause
# rlock - hand-written Makefile in the style of hiredis/redis.
#
#   make                 librlock.a, librlock.so (soname from include/rlock.h), rlock.pc,
#                        the CMake package and man pages (build/cmake, build/man), rlockctl,
#                        and the examples (make examples: examples/*.c)
#   make test            install missing Debian packages, start a throwaway redis-server,
#                        run the whole suite, stop the server
#   make test SAN=address|thread   the same under ASan+UBSan or TSan (own build dir)
#   make valgrind        the suite under valgrind memcheck
#   make test-faults     the fault-injection suite (starts and kills its own servers)
#   make test-sentinel   Sentinel and WAIT: a master, replicas and sentinels of its own
#   make test-cluster    Redis Cluster: 3 masters + 3 replicas of its own per test
#   make test-tls        rediss:// against TLS redis-servers of its own (certificates by openssl)
#   make test-redlock    Redlock under master faults: 3 and 5 redis-servers of its own
#   make test-redisson   interop with Java Redisson (3.x and 4.x) against a throwaway
#                        redis-server; installs Java 17 and Maven from Debian if missing
#   make demo            the "don't oversell" demo against a throwaway redis-server
#   make bench           benchmarks against a raw-hiredis baseline (TLS rows against a raw
#                        OpenSSL client and a TLS redis-server of their own)
#   make bench-redisson  rlock beside Java Redisson (RLock, fair lock), one throwaway
#                        redis-server; installs Java 17 and Maven from Debian if missing
#   make install PREFIX=/usr/local DESTDIR=     (make uninstall with the same PREFIX)
#                        (the library, rlock.h, rlock.pc, the CMake package under
#                        lib/cmake/rlock, bin/rlockctl, and the man pages rlockctl.1
#                        and rlock.3)
#   make check-lua       every Lua script (src/kind/lua/, preludes included) parses as Lua 5.1
#   make check-docs      the docs, README and man pages name only files and rlock identifiers
#                        that exist, link to files that exist, and "design.md §N" has a page
#   make check-install   install to a temp prefix, build and run the README example
#                        through pkg-config and CMake, shared and static; check the man pages
#
# The user's CC, CPPFLAGS, CFLAGS, LDFLAGS, PREFIX and DESTDIR are honoured; our flags
# are added next to them, never instead of them.

VERSION_MAJOR := $(shell sed -n 's/^\#define RLOCK_VERSION_MAJOR \([0-9]*\).*/\1/p' include/rlock.h)
VERSION_MINOR := $(shell sed -n 's/^\#define RLOCK_VERSION_MINOR \([0-9]*\).*/\1/p' include/rlock.h)
VERSION_PATCH := $(shell sed -n 's/^\#define RLOCK_VERSION_PATCH \([0-9]*\).*/\1/p' include/rlock.h)
VERSION := $(VERSION_MAJOR).$(VERSION_MINOR).$(VERSION_PATCH)

CC ?= cc
OPTIMIZATION ?= -O2
USE_WERROR ?= 1
PREFIX ?= /usr/local
# Plain '=' so that compiler variables in the environment (gcc reads LIBRARY_PATH)
# never redirect an install; override them on the command line.
INCLUDEDIR = include
LIBDIR = lib
BINDIR = bin
PKGCONFDIR = pkgconfig
CMAKEDIR = cmake/rlock
MANDIR = share/man
INSTALL ?= install

WARNINGS := -Wall -Wextra -Wstrict-prototypes -Wwrite-strings -Wshadow -Wno-missing-field-initializers
ifeq ($(USE_WERROR),1)
WARNINGS += -Werror
endif

# SAN=address (ASan+UBSan) or SAN=thread (TSan); each gets its own build directory.
SAN ?=
ifeq ($(SAN),address)
SAN_FLAGS := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
else ifeq ($(SAN),thread)
SAN_FLAGS := -fsanitize=thread -fno-omit-frame-pointer
else ifneq ($(SAN),)
$(error SAN must be address or thread)
endif

BUILD ?= build$(if $(SAN),-$(SAN))
REAL_CFLAGS := -std=c11 -D_GNU_SOURCE -pthread -g $(OPTIMIZATION) -fPIC $(WARNINGS) $(SAN_FLAGS) \
               -Iinclude $(CPPFLAGS) $(CFLAGS) $(RLOCK_CFLAGS)
LIB_CFLAGS := $(REAL_CFLAGS) -fvisibility=hidden
REAL_LDFLAGS := -pthread $(SAN_FLAGS) $(LDFLAGS)

# Which hiredis (0.14 or 1.x): HIREDIS_PREFIX=/opt/hiredis (its include/ and lib/, the
# library found there at run time too), else pkg-config's hiredis, else the compiler's
# own paths (Debian's libhiredis-dev); CFLAGS/LDFLAGS given by hand still come first.
HIREDIS_PREFIX ?=
ifneq ($(HIREDIS_PREFIX),)
HIREDIS_CFLAGS := -I$(HIREDIS_PREFIX)/include
HIREDIS_LIBS := -L$(HIREDIS_PREFIX)/lib -Wl,-rpath,$(HIREDIS_PREFIX)/lib -lhiredis
else
HIREDIS_CFLAGS := $(shell pkg-config --cflags-only-I hiredis 2>/dev/null)
HIREDIS_LIBS := $(or $(shell pkg-config --libs hiredis 2>/dev/null),-lhiredis)
endif
REAL_CFLAGS += $(HIREDIS_CFLAGS)
LIB_CFLAGS += $(HIREDIS_CFLAGS)
LIBS := $(HIREDIS_LIBS) -luuid -lssl -lcrypto

# Which server the tests run (make test REDIS_SERVER=/opt/valkey/bin/valkey-server): a bin
# directory of its own named as the tests expect (scripts/server-bin.sh) goes first in PATH.
REDIS_SERVER ?=
ifneq ($(REDIS_SERVER),)
SERVER_BIN := $(abspath $(BUILD)/server-bin)
export PATH := $(SERVER_BIN):$(PATH)
SERVER_SETUP = @scripts/server-bin.sh $(REDIS_SERVER) $(SERVER_BIN)
endif

ifeq ($(V),1)
Q :=
else
Q := @
endif

SRCS := $(wildcard src/*/*.c)
# The Lua scripts (src/kind/lua/*.lua; the Lua they share in src/kind/lua/prelude/)
# become C in the build directory (scripts/lua-gen.sh): gen/lua_scripts.c, compiled
# into the kind layer's objects, and gen/lua_scripts.h (kind/scripts.c's table).
# Generated, never committed: the .lua files are the one copy to edit.
LUA_SCRIPTS := $(wildcard src/kind/lua/*.lua)
LUA_INPUTS := $(LUA_SCRIPTS) $(wildcard src/kind/lua/prelude/*.lua) scripts/lua-gen.sh
LUA_GEN := $(BUILD)/gen/lua_scripts
OBJS := $(patsubst src/%.c,$(BUILD)/obj/%.o,$(SRCS)) $(BUILD)/obj/kind/lua_scripts.o
STLIB := $(BUILD)/librlock.a
SONAME := librlock.so.$(VERSION_MAJOR)
DYLIB := $(BUILD)/librlock.so.$(VERSION)
PCFILE := $(BUILD)/rlock.pc
CMAKE_FILES := $(BUILD)/cmake/rlockConfig.cmake $(BUILD)/cmake/rlockConfigVersion.cmake
MAN_PAGES := $(BUILD)/man/rlockctl.1 $(BUILD)/man/rlock.3

TEST_SRCS := $(wildcard test/test_*.c)
TEST_BINS := $(patsubst test/%.c,$(BUILD)/test/%,$(TEST_SRCS))
SENTINEL_SRCS := $(wildcard test/sentinel_*.c)
SENTINEL_BINS := $(patsubst test/%.c,$(BUILD)/test/%,$(SENTINEL_SRCS))
CLUSTER_SRCS := $(wildcard test/cluster_*.c)
CLUSTER_BINS := $(patsubst test/%.c,$(BUILD)/test/%,$(CLUSTER_SRCS))
REDLOCK_SRCS := $(wildcard test/redlock_*.c)
REDLOCK_BINS := $(patsubst test/%.c,$(BUILD)/test/%,$(REDLOCK_SRCS))
TLS_SRCS := $(wildcard test/tls_*.c)
TLS_BINS := $(patsubst test/%.c,$(BUILD)/test/%,$(TLS_SRCS))
FAULT_SRCS := $(wildcard test/fault_*.c)
FAULT_BINS := $(patsubst test/%.c,$(BUILD)/test/%,$(FAULT_SRCS))
HARNESS_SRCS := $(wildcard test/harness/*.c)
HARNESS_OBJS := $(patsubst test/harness/%.c,$(BUILD)/test/harness/%.o,$(HARNESS_SRCS))
HARNESS_HDRS := test/harness.h $(wildcard test/harness/*.h)
BENCH_SRCS := $(wildcard test/bench/*.c)
BENCH_BINS := $(patsubst test/bench/%.c,$(BUILD)/bench/%,$(BENCH_SRCS))
DEMO := $(BUILD)/demo
# rlockctl, the operator's tool (tools/rlockctl/, docs/rlockctl.md).
RLOCKCTL_SRCS := $(wildcard tools/rlockctl/*.c)
RLOCKCTL := $(BUILD)/rlockctl
EXAMPLE_SRCS := $(wildcard examples/*.c)
EXAMPLE_BINS := $(patsubst examples/%.c,$(BUILD)/examples/%,$(EXAMPLE_SRCS))

.PHONY: all examples deps test check test-sentinel test-cluster test-redlock test-tls test-redisson test-faults valgrind demo bench bench-redisson soak install uninstall clean noopt cppcheck tools check-install check-layers check-lua check-docs

all: $(STLIB) $(DYLIB) $(PCFILE) $(CMAKE_FILES) $(MAN_PAGES) $(RLOCKCTL) $(EXAMPLE_BINS)

examples: $(EXAMPLE_BINS)

# -MMD: the compiler writes each object's header dependencies (.d files); an
# object without its .d (a tree built before) is rebuilt once to get one.
$(BUILD)/obj/%.o: src/%.c $(BUILD)/obj/%.d
	@mkdir -p $(dir $@)
	$(if $(Q),@echo "  CC      $<")
	$(Q)$(CC) $(LIB_CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/obj/%.d: ;
.PRECIOUS: $(BUILD)/obj/%.d

# One run of the generator per file (c: the texts, h: their declarations and line
# maps), so that make -j never runs one recipe for two targets; written whole or not
# at all (a failed run leaves no half file for the next make to trust).
$(LUA_GEN).%: $(LUA_INPUTS)
	@mkdir -p $(dir $@)
	$(if $(Q),@echo "  LUAGEN  $@")
	$(Q)scripts/lua-gen.sh $* $(LUA_SCRIPTS) > $@.tmp && mv $@.tmp $@

$(BUILD)/obj/kind/lua_scripts.o: $(LUA_GEN).c $(LUA_GEN).h
	@mkdir -p $(dir $@)
	$(if $(Q),@echo "  CC      $<")
	$(Q)$(CC) $(LIB_CFLAGS) -I$(dir $(LUA_GEN)) -c $< -o $@

# The table includes the generated header: named here, as its .d does not exist yet
# on a first build.
$(BUILD)/obj/kind/scripts.o: $(LUA_GEN).h
$(BUILD)/obj/kind/scripts.o: LIB_CFLAGS += -I$(dir $(LUA_GEN))

-include $(OBJS:.o=.d)

$(STLIB): $(OBJS)
	$(if $(Q),@echo "  AR      $@")
	$(Q)rm -f $@ && ar rcs $@ $^

# Only rlock_* symbols are exported: -fvisibility=hidden plus RLOCK_EXTERN.
$(DYLIB): $(OBJS)
	$(if $(Q),@echo "  LD      $@")
	$(Q)$(CC) -shared -Wl,-soname,$(SONAME) -o $@ $^ $(REAL_LDFLAGS) $(LIBS)
	$(Q)ln -sf librlock.so.$(VERSION) $(BUILD)/$(SONAME)
	$(Q)ln -sf $(SONAME) $(BUILD)/librlock.so

# The .pc names the prefix it is installed under, so install writes it anew
# with the PREFIX given then; this build-tree copy uses the PREFIX of the build.
# rlock.h includes no hiredis header, so hiredis is no Requires.private: that
# would give every consumer hiredis's -I and -D flags (pkg-config --cflags
# follows Requires.private). A static link gets hiredis from Libs.private.
PC_LINES = 'prefix=$(1)' 'libdir=$${prefix}/$(LIBDIR)' \
  'includedir=$${prefix}/$(INCLUDEDIR)' '' 'Name: rlock' \
  'Description: Redisson-compatible reentrant Redis locks for C' 'Version: $(VERSION)' \
  'Libs: -L$${libdir} -lrlock' \
  'Libs.private: $(strip $(addprefix -L,$(LINK_DIRS)) -lhiredis -luuid -lssl -lcrypto -pthread)' 'Cflags: -I$${includedir}'

# The -L directories librlock was linked with (LDFLAGS, hiredis's flags): where a
# static link finds the same hiredis (rlock.pc's Libs.private, the CMake package).
LINK_DIRS = $(patsubst -L%,%,$(filter -L%,$(REAL_LDFLAGS) $(LIBS)))

$(PCFILE): include/rlock.h Makefile
	@mkdir -p $(dir $@)
	$(Q)printf '%s\n' $(call PC_LINES,$(PREFIX)) > $@

# The CMake package (cmake/*.cmake.in; find_package(rlock CONFIG) gives
# rlock::rlock and rlock::rlock_static) and the man pages (docs/man/) are
# filled in by sed, so building rlock needs no CMake. Like the .pc, the
# package names its prefix: install writes it anew for the PREFIX given then.
SIZEOF_VOID_P = $(shell echo __SIZEOF_POINTER__ | $(CC) -E -P - 2>/dev/null)
SUBST = sed -e 's|@VERSION@|$(VERSION)|g' -e 's|@VERSION_MAJOR@|$(VERSION_MAJOR)|g' \
  -e 's|@SONAME@|$(SONAME)|g' -e 's|@SIZEOF_VOID_P@|$(SIZEOF_VOID_P)|g' -e 's|@LINK_DIRS@|$(LINK_DIRS)|g' \
  -e 's|@LIBDIR@|$(1)/$(LIBDIR)|g' -e 's|@INCLUDEDIR@|$(1)/$(INCLUDEDIR)|g'

$(BUILD)/cmake/%.cmake: cmake/%.cmake.in include/rlock.h Makefile
	@mkdir -p $(dir $@)
	$(Q)$(call SUBST,$(PREFIX)) $< > $@

$(BUILD)/man/%: docs/man/% include/rlock.h Makefile
	@mkdir -p $(dir $@)
	$(Q)$(call SUBST,$(PREFIX)) $< > $@

# The examples (examples/*.c): programs of the public header only, linked with the static library.
$(BUILD)/examples/%: examples/%.c $(STLIB) include/rlock.h
	@mkdir -p $(dir $@)
	$(if $(Q),@echo "  CC      $<")
	$(Q)$(CC) $(REAL_CFLAGS) $< $(STLIB) -o $@ $(REAL_LDFLAGS) $(LIBS)

# The test harness (test/harness/*.c, one object per concern; -Itest for
# harness.h and rawredis.h), with header dependencies as for the library.
$(BUILD)/test/harness/%.o: test/harness/%.c $(BUILD)/test/harness/%.d
	@mkdir -p $(dir $@)
	$(if $(Q),@echo "  CC      $<")
	$(Q)$(CC) $(REAL_CFLAGS) -Itest -MMD -MP -c $< -o $@

$(BUILD)/test/harness/%.d: ;
.PRECIOUS: $(BUILD)/test/harness/%.d

-include $(HARNESS_OBJS:.o=.d)

$(BUILD)/test/%: test/%.c $(HARNESS_OBJS) $(STLIB) $(HARNESS_HDRS)
	@mkdir -p $(dir $@)
	$(if $(Q),@echo "  CC      $<")
	$(Q)$(CC) $(REAL_CFLAGS) -Isrc $< $(HARNESS_OBJS) $(STLIB) -o $@ $(REAL_LDFLAGS) $(LIBS) -lcmocka

# test_prometheus.c includes the example it checks.
$(BUILD)/test/test_prometheus: examples/prometheus.c

# test_rw_shared.c includes the example it checks.
$(BUILD)/test/test_rw_shared: examples/shared_read.c

# Fault-injection binaries also link the TCP proxy of test/proxy.c (public calls,
# loop) and test/proxy_relay.c (queues, connections) (this rule's shorter stem
# makes make prefer it to the one above for test/fault_*.c).
PROXY_OBJS := $(BUILD)/test/proxy.o $(BUILD)/test/proxy_relay.o

$(PROXY_OBJS): $(BUILD)/test/%.o: test/%.c test/proxy.h test/proxy_priv.h $(HARNESS_HDRS) include/rlock.h
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(REAL_CFLAGS) -c $< -o $@

$(BUILD)/test/fault_%: test/fault_%.c $(HARNESS_OBJS) $(PROXY_OBJS) $(STLIB) $(HARNESS_HDRS) test/proxy.h
	@mkdir -p $(dir $@)
	$(if $(Q),@echo "  CC      $<")
	$(Q)$(CC) $(REAL_CFLAGS) -Isrc $< $(HARNESS_OBJS) $(PROXY_OBJS) $(STLIB) -o $@ $(REAL_LDFLAGS) $(LIBS) -lcmocka

$(BUILD)/bench/%: test/bench/%.c test/bench/bench.h test/bench/floor.h test/rawredis.h $(HARNESS_OBJS) $(STLIB)
	@mkdir -p $(dir $@)
	$(if $(Q),@echo "  CC      $<")
	$(Q)$(CC) $(REAL_CFLAGS) -Isrc -Itest $< $(HARNESS_OBJS) $(STLIB) -o $@ $(REAL_LDFLAGS) $(LIBS) -lm

# bench_cluster is one program: its main and shared helpers (test/bench/bench_cluster.c)
# and one file per section (test/bench/cluster/*.c). It counts the pipelines its
# rlock-watchdog thread writes per node (the round trips of a renewal round) and
# the rounds by wrapping the library's rlock__io_flush and rlock__holds_snapshot
# (test/bench/cluster/watchdog.c).
BENCH_CLUSTER_SRCS := $(wildcard test/bench/cluster/*.c)

$(BUILD)/bench/bench_cluster: test/bench/bench_cluster.c $(BENCH_CLUSTER_SRCS) \
                              test/bench/cluster/bench_cluster.h test/bench/bench.h test/bench/floor.h \
                              test/rawredis.h \
                              $(HARNESS_OBJS) $(STLIB)
	@mkdir -p $(dir $@)
	$(if $(Q),@echo "  CC      $< $(BENCH_CLUSTER_SRCS)")
	$(Q)$(CC) $(REAL_CFLAGS) -Isrc -Itest $< $(BENCH_CLUSTER_SRCS) $(HARNESS_OBJS) $(STLIB) -o $@ \
	  $(REAL_LDFLAGS) -Wl,--wrap=rlock__io_flush -Wl,--wrap=rlock__holds_snapshot $(LIBS) -lm

# bench_rlock is one program: its main and shared helpers (test/bench/bench_rlock.c)
# and one file per subcommand (test/bench/rlock/*.c).
BENCH_RLOCK_SRCS := $(wildcard test/bench/rlock/*.c)

$(BUILD)/bench/bench_rlock: test/bench/bench_rlock.c $(BENCH_RLOCK_SRCS) test/bench/rlock/bench_rlock.h \
                            test/bench/bench.h test/rawredis.h $(HARNESS_OBJS) $(STLIB)
	@mkdir -p $(dir $@)
	$(if $(Q),@echo "  CC      $< $(BENCH_RLOCK_SRCS)")
	$(Q)$(CC) $(REAL_CFLAGS) -Isrc -Itest $< $(BENCH_RLOCK_SRCS) $(HARNESS_OBJS) $(STLIB) -o $@ $(REAL_LDFLAGS) $(LIBS) -lm

# The demo: test/demo/main.c (options, the parent), seller.c, verdict.c.
DEMO_SRCS := $(wildcard test/demo/*.c)

$(DEMO): $(DEMO_SRCS) test/demo/demo.h test/rawredis.h $(HARNESS_OBJS) $(STLIB)
	@mkdir -p $(dir $@)
	$(if $(Q),@echo "  CC      $(DEMO_SRCS)")
	$(Q)$(CC) $(REAL_CFLAGS) -Itest $(DEMO_SRCS) $(HARNESS_OBJS) $(STLIB) -o $@ $(REAL_LDFLAGS) $(LIBS) -lm

# rlockctl links librlock.a statically: it uses the public API plus the read-only
# inspection seam src/api/inspect.h, which librlock.so does not export (-Isrc for it).
$(RLOCKCTL): $(RLOCKCTL_SRCS) tools/rlockctl/rlockctl.h src/api/inspect.h $(STLIB)
	@mkdir -p $(dir $@)
	$(if $(Q),@echo "  CC      $(RLOCKCTL_SRCS)")
	$(Q)$(CC) $(REAL_CFLAGS) -Isrc $(RLOCKCTL_SRCS) $(STLIB) -o $@ $(REAL_LDFLAGS) $(LIBS)

# Its tests run it as a process: built first.
$(BUILD)/test/test_rlockctl $(BUILD)/test/sentinel_rlockctl $(BUILD)/test/cluster_rlockctl: $(RLOCKCTL)

# The C side of the Redisson interop suite: a process the Java tests drive over stdin.
REDISSON_ACTOR := $(BUILD)/redisson/rlock_actor

$(REDISSON_ACTOR): test/redisson/actors/rlock_actor.c $(STLIB) include/rlock.h
	@mkdir -p $(dir $@)
	$(if $(Q),@echo "  CC      $<")
	$(Q)$(CC) $(REAL_CFLAGS) $< $(STLIB) -o $@ $(REAL_LDFLAGS) $(LIBS)

deps:
	@scripts/deps.sh
	$(SERVER_SETUP)

tools: deps all $(TEST_BINS) $(FAULT_BINS) $(SENTINEL_BINS) $(CLUSTER_BINS) $(REDLOCK_BINS) $(TLS_BINS)

# TEST_PREFIX wraps every test binary (valgrind uses it); TEST_TIMEOUT_SCALE stretches deadlines.
test: deps
	@$(MAKE) --no-print-directory all $(TEST_BINS)
	@scripts/with-redis.sh scripts/run-tests.sh $(TEST_BINS)

check: test

# Master, replicas and sentinels of its own (redis-sentinel from Debian), per test file.
test-sentinel: deps
	@$(MAKE) --no-print-directory all $(SENTINEL_BINS)
	@scripts/run-tests.sh $(SENTINEL_BINS)

# Six cluster nodes of its own per test (redis-server, and redis-cli --cluster create).
test-cluster: deps
	@$(MAKE) --no-print-directory all $(CLUSTER_BINS)
	@scripts/run-tests.sh $(CLUSTER_BINS)

# Redlock under master faults: 3 and 5 redis-servers of its own per test (killed, paused,
# restarted empty), and a 4 x 4 exclusion run with a master killed.
test-redlock: deps
	@$(MAKE) --no-print-directory all $(REDLOCK_BINS)
	@scripts/run-tests.sh $(REDLOCK_BINS)

# rediss:// against TLS redis-servers of its own (scripts/with-tls-redis.sh: its own CA,
# server, wrong-name, expired and client certificates; plain, mutual-TLS servers).
test-tls: deps
	@$(MAKE) --no-print-directory all $(TLS_BINS)
	@scripts/with-tls-redis.sh scripts/run-tests.sh $(TLS_BINS)

# Java Redisson against the C actors (test/redisson/run.sh: Maven, offline when it can).
# REDISSON_VERSIONS picks the Redisson versions (default: newest 3.x and 4.x tested).
test-redisson: deps
	@scripts/deps.sh openjdk-17-jdk-headless maven
	@$(MAKE) --no-print-directory all $(REDISSON_ACTOR)
	@scripts/with-redis.sh test/redisson/run.sh $(REDISSON_ACTOR) $(BUILD)/examples/turns

test-faults: deps
	@$(MAKE) --no-print-directory all $(FAULT_BINS)
	@scripts/run-tests.sh $(FAULT_BINS)

valgrind: deps
	@$(MAKE) --no-print-directory all $(TEST_BINS)
	@TEST_PREFIX="valgrind --quiet --error-exitcode=99 --leak-check=full --show-leak-kinds=definite,indirect,possible --errors-for-leak-kinds=definite,indirect,possible --track-fds=no" \
	  TEST_TIMEOUT_SCALE=10 TEST_JOBS=$${TEST_JOBS:-2} scripts/with-redis.sh scripts/run-tests.sh $(TEST_BINS)

demo: deps
	@$(MAKE) --no-print-directory all $(DEMO)
	@scripts/with-redis.sh sh -c '$(DEMO) --url "$$RLOCK_TEST_URL" $(DEMO_ARGS)'

bench: deps
	@$(MAKE) --no-print-directory all $(BENCH_BINS)
	@scripts/with-redis.sh test/bench/run.sh $(BUILD)

# rlock's bench_rlock rows and Redisson's (test/redisson/bench.sh) against one server.
# REDISSON_VERSION picks the Redisson version (default 3.52.0).
bench-redisson: deps
	@scripts/deps.sh openjdk-17-jdk-headless maven
	@$(MAKE) --no-print-directory all $(BUILD)/bench/bench_rlock
	@scripts/with-redis.sh test/redisson/bench.sh $(BUILD)

MINUTES ?= 5
soak: deps
	@$(MAKE) --no-print-directory all $(FAULT_BINS)
	@SOAK_MINUTES=$(MINUTES) scripts/run-tests.sh $(BUILD)/test/fault_stress

# The layers call in one direction (api -> group -> kind -> engine -> net -> core).
check-layers: all
	@scripts/check-layers.sh $(BUILD)/obj
	@scripts/check-layers.sh --self-test $(BUILD)/obj

# Each script's text as sent (its preludes included: a prelude alone need not be a
# whole chunk) parses as Lua 5.1, the Lua Redis embeds: syntax only (luac -p), before
# any server sees it. Debian's lua5.1 (scripts/deps.sh). luac names a line of the text
# ("stdin:N"): the generated header maps it to file:line.
check-lua: $(LUA_GEN).h
	@for script in $(LUA_SCRIPTS); do \
	  scripts/lua-gen.sh text $$script | luac5.1 -p - || \
	    { echo "check-lua: $$script: stdin:N is line N of its text ($(LUA_GEN).h maps it)" >&2; exit 1; }; \
	done; echo "check-lua: $(words $(LUA_SCRIPTS)) scripts parse as Lua 5.1 (luac5.1 -p)"

# The docs name only what exists: files, rlock_/RLOCK_ identifiers, links, design pages
# (scripts/check-docs.sh says what it reads); its self-test plants two missing names.
check-docs:
	@scripts/check-docs.sh
	@scripts/check-docs.sh --self-test

cppcheck:
	cppcheck --quiet --error-exitcode=1 --enable=warning,portability,performance \
	  --std=c11 --inline-suppr -Iinclude -Isrc -D__GNUC__=12 --suppress=missingIncludeSystem src tools

noopt:
	$(MAKE) OPTIMIZATION=-O0

install: all
	$(INSTALL) -d $(DESTDIR)$(PREFIX)/$(INCLUDEDIR) $(DESTDIR)$(PREFIX)/$(LIBDIR)/$(PKGCONFDIR) \
	  $(DESTDIR)$(PREFIX)/$(LIBDIR)/$(CMAKEDIR) $(DESTDIR)$(PREFIX)/$(BINDIR) \
	  $(DESTDIR)$(PREFIX)/$(MANDIR)/man1 $(DESTDIR)$(PREFIX)/$(MANDIR)/man3
	$(INSTALL) -m 755 $(RLOCKCTL) $(DESTDIR)$(PREFIX)/$(BINDIR)
	$(INSTALL) -m 644 include/rlock.h $(DESTDIR)$(PREFIX)/$(INCLUDEDIR)
	$(INSTALL) -m 644 $(STLIB) $(DESTDIR)$(PREFIX)/$(LIBDIR)
	$(INSTALL) -m 755 $(DYLIB) $(DESTDIR)$(PREFIX)/$(LIBDIR)
	ln -sf librlock.so.$(VERSION) $(DESTDIR)$(PREFIX)/$(LIBDIR)/$(SONAME)
	ln -sf $(SONAME) $(DESTDIR)$(PREFIX)/$(LIBDIR)/librlock.so
	printf '%s\n' $(call PC_LINES,$(PREFIX)) > $(DESTDIR)$(PREFIX)/$(LIBDIR)/$(PKGCONFDIR)/rlock.pc
	$(call SUBST,$(PREFIX)) cmake/rlockConfig.cmake.in > $(DESTDIR)$(PREFIX)/$(LIBDIR)/$(CMAKEDIR)/rlockConfig.cmake
	$(call SUBST,$(PREFIX)) cmake/rlockConfigVersion.cmake.in \
	  > $(DESTDIR)$(PREFIX)/$(LIBDIR)/$(CMAKEDIR)/rlockConfigVersion.cmake
	$(INSTALL) -m 644 $(BUILD)/man/rlockctl.1 $(DESTDIR)$(PREFIX)/$(MANDIR)/man1
	$(INSTALL) -m 644 $(BUILD)/man/rlock.3 $(DESTDIR)$(PREFIX)/$(MANDIR)/man3

# Exactly what install wrote.
uninstall:
	rm -f $(DESTDIR)$(PREFIX)/$(INCLUDEDIR)/rlock.h \
	  $(DESTDIR)$(PREFIX)/$(LIBDIR)/librlock.a \
	  $(DESTDIR)$(PREFIX)/$(LIBDIR)/librlock.so.$(VERSION) \
	  $(DESTDIR)$(PREFIX)/$(LIBDIR)/$(SONAME) \
	  $(DESTDIR)$(PREFIX)/$(LIBDIR)/librlock.so \
	  $(DESTDIR)$(PREFIX)/$(LIBDIR)/$(PKGCONFDIR)/rlock.pc \
	  $(DESTDIR)$(PREFIX)/$(LIBDIR)/$(CMAKEDIR)/rlockConfig.cmake \
	  $(DESTDIR)$(PREFIX)/$(LIBDIR)/$(CMAKEDIR)/rlockConfigVersion.cmake \
	  $(DESTDIR)$(PREFIX)/$(BINDIR)/rlockctl \
	  $(DESTDIR)$(PREFIX)/$(MANDIR)/man1/rlockctl.1 \
	  $(DESTDIR)$(PREFIX)/$(MANDIR)/man3/rlock.3
	rmdir $(DESTDIR)$(PREFIX)/$(LIBDIR)/$(CMAKEDIR) 2>/dev/null || true

# Installs to a temp prefix from this tree, builds the README's example with
# pkg-config and with CMake, each shared and static, and runs them against a
# throwaway redis-server; checks the installed man pages with man -l.
check-install: deps
	@scripts/check-install.sh

clean:
	rm -rf build build-address build-thread $(BUILD) test/redisson/target examples/java/target
