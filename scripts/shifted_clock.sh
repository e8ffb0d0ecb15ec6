#!/usr/bin/env bash
# Run a command with the wall clock moved by OFFSET (Debian's libfaketime), e.g. the suite a year ahead:
#   scripts/shifted_clock.sh +400d make test-sqlite
#   scripts/shifted_clock.sh -365d make test-sqlite
# Only CLOCK_REALTIME moves (what datetime.now and time.time read); the monotonic clock, which timeouts, waits and
# sleeps are measured by, keeps real time. libfaketime 0.9.10 gets one thing wrong there: an absolute sleep on the
# monotonic clock (Python's time.sleep) fails with EINVAL. A ten-line shim, preloaded before it, passes such sleeps
# straight to the kernel.
set -euo pipefail
if [ $# -lt 2 ]; then
  echo "usage: $0 OFFSET COMMAND... (OFFSET as faketime takes it: +400d, -365d)" >&2
  exit 2
fi
offset=$1
shift
lib=$(ls /usr/lib/*/faketime/libfaketime.so.1 2>/dev/null | head -n 1 || true)
if [ -z "$lib" ]; then
  echo "$0: libfaketime is not installed (Debian: apt-get install faketime)" >&2
  exit 2
fi
shim_dir=$(mktemp -d)
trap 'rm -rf "$shim_dir"' EXIT
cat >"$shim_dir/shim.c" <<'C'
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
int clock_nanosleep(clockid_t clock_id, int flags, const struct timespec *request, struct timespec *remain) {
    static int (*next)(clockid_t, int, const struct timespec *, struct timespec *);
    if (clock_id != CLOCK_REALTIME) {
        return syscall(SYS_clock_nanosleep, clock_id, flags, request, remain) == 0 ? 0 : errno;
    }
    if (!next) next = dlsym(RTLD_NEXT, "clock_nanosleep");
    return next(clock_id, flags, request, remain);
}
C
cc -shared -fPIC -O2 -o "$shim_dir/shim.so" "$shim_dir/shim.c" -ldl
echo "$0: the wall clock reads $(LD_PRELOAD="$lib" FAKETIME="$offset" date -u '+%Y-%m-%d %H:%M UTC') for: $*" >&2
LD_PRELOAD="$shim_dir/shim.so $lib" FAKETIME="$offset" FAKETIME_DONT_FAKE_MONOTONIC=1 "$@"
