#!/usr/bin/env bash
# Shows that a new NIC vendor needs its crate, one line in the vendor table and its Cargo
# entries — nothing else in the tree — by adding one in a copy of this working tree and checking
# that every user of the table sees it:
#
#   scripts/new-provider.sh [--keep]
#
# The vendor, `stub`, is a copy of `providers/native` renamed (its own provider, formats and
# device model), with a made-up PCI vendor id and a `gda_rdma::Host` impl whose control path
# refuses to open hardware (a real vendor's `host.rs` brings it up through rdma-core), so its
# table line carries `[host]` and the verbs-compatible library shows a device for it. The copy
# then gets exactly: the crate, `stub => gda_stub::Stub [host],` in `register!`, and the Cargo
# lines (workspace member and dependency, the table's dependency and its `host` feature).
# Checked, each with a count the script asserts:
#   1. `gda devices --json`: the software NIC's models and the verbs library's devices name it;
#   2. the verbs-compatible library: `ibv_devices` lists `gda_stub_0`, and Debian's unmodified
#      `ibv_rc_pingpong` runs between two processes on it (the stub's formats);
#   3. `gda perf --provider stub` (the in-process software NIC);
#   4. the conformance suite's provider-generic tests in module `stub::`;
#   5. the C ABI: a C program built with `gdacc` runs under `gdarun` with
#      `GDA_SHMEM_PROVIDER=stub` over RDMA.
# It builds the copy from scratch in its own target directory (several minutes on 2 cores).
set -euo pipefail
cd "$(dirname "$0")/.."
keep=0
[ "${1:-}" = "--keep" ] && keep=1
tmp=$(mktemp -d /tmp/gda-new-provider.XXXXXX)
cleanup() { [ $keep = 1 ] && echo "kept $tmp" || rm -rf "$tmp"; }
trap cleanup EXIT
fail() { echo "new-provider: FAILED: $*" >&2; exit 1; }

# The working tree as it is (tracked and untracked files that git does not ignore).
git ls-files -z --cached --others --exclude-standard | xargs -0 cp --parents -t "$tmp"
cd "$tmp"

# ---- the crate --------------------------------------------------------------------------------
cp -r providers/native providers/stub
find providers/stub -type f -exec sed -i -e 's/gda-native/gda-stub/g; s/gda_native/gda_stub/g' \
  -e 's/Native/Stub/g; s/"native"/"stub"/g' {} +
lib=providers/stub/src/lib.rs
grep -q 'const NAME: &'"'"'static str = "stub";' "$lib" || fail "could not rename the copied provider"
# A PCI vendor id no real NIC has (0xfffe is not assigned), so the table routes it to `stub`.
sed -i 's/    const NAME: &'"'"'static str = "stub";/&\n    const PCI_VENDOR_IDS: \&'"'"'static [u32] = \&[0xfffe];/' "$lib"
cat >> "$lib" <<'EOF'

/// The hardware facet: a real vendor opens its NICs through rdma-core here; the stub has no
/// hardware, so its control path refuses (the software NIC's device stands as the type).
#[cfg(feature = "verbs")]
impl gda_rdma::Host for Stub {
    const FAMILY: &'static str = "stub NIC";
    const LABEL: &'static str = "stub (no hardware control path)";
    type Device = gda_sim::SimDevice<Stub>;
    type OpenError = std::io::Error;
    fn on(ctx: std::sync::Arc<gda_rdma::Context>) -> Result<Self::Device, Self::OpenError> {
        Err(std::io::Error::other(std::format!(
            "{}: the stub provider has no hardware control path",
            ctx.info().name
        )))
    }
}
EOF
python3 - providers/stub/Cargo.toml <<'EOF'
import sys
p = sys.argv[1]
s = open(p).read()
s = s.replace('model = ["std", "gda-hal/model"]',
              'model = ["std", "gda-hal/model"]\nverbs = ["model", "dep:gda-rdma", "dep:gda-sim"]')
s = s.replace('bytemuck.workspace = true',
              'bytemuck.workspace = true\ngda-rdma = { path = "../../rdma", optional = true }\n'
              'gda-sim = { workspace = true, optional = true }')
open(p, "w").write(s)
EOF
grep -q '^verbs = ' providers/stub/Cargo.toml || fail "could not add the stub's verbs feature"

# ---- the Cargo entries and the table line -----------------------------------------------------
python3 - <<'EOF'
import re
def edit(path, old, new, count=1):
    s = open(path).read()
    if old not in s:
        raise SystemExit(f"new-provider: {path}: {old!r} not found")
    open(path, "w").write(s.replace(old, new, count))
# members and default-members
edit("Cargo.toml", '"providers/native", ', '"providers/native", "providers/stub", ', 2)
s = open("Cargo.toml").read()
if s.count('"providers/stub"') != 2:
    raise SystemExit("new-provider: Cargo.toml: members and default-members not both updated")
edit("Cargo.toml", 'gda-native = { path = "providers/native", version = "0.1.0", default-features = false }',
     'gda-native = { path = "providers/native", version = "0.1.0", default-features = false }\n'
     'gda-stub = { path = "providers/stub", version = "0.1.0", default-features = false }')
edit("providers/table/Cargo.toml", 'gda-native = { workspace = true, features = ["model"] }',
     'gda-native = { workspace = true, features = ["model"] }\n'
     'gda-stub = { workspace = true, features = ["model"] }')
edit("providers/table/Cargo.toml", '"gda-bnxt/verbs"]', '"gda-bnxt/verbs", "gda-stub/verbs"]')
# The one table line.
edit("providers/table/src/lib.rs", "    bnxt => gda_bnxt::Bnxt [host],\n",
     "    bnxt => gda_bnxt::Bnxt [host],\n    stub => gda_stub::Stub [host],\n")
EOF

export CARGO_TARGET_DIR="$tmp/target"
echo "==> building the copy with the stub vendor (debug)"
cargo build -q --features capi,verbs --bin gda --bin gdarun --bin gdacc
cargo build -q -p gda-verbs
bin="$CARGO_TARGET_DIR/debug"
verbs_lib="$bin/verbs-sim"
checks=0

# ---- 1. gda devices ---------------------------------------------------------------------------
out=$(GDA_IBVERBS_LIB="$verbs_lib/libibverbs.so.1" "$bin/gda" devices --json)
python3 - "$out" <<'EOF' || fail "gda devices does not show the stub: $out"
import json, sys
v = json.loads(sys.argv[1])
assert "stub" in v["software_nic"]["models"], v["software_nic"]["models"]
devs = [d for d in v["devices"] if d["provider"] == "stub"]
assert len(devs) == 1 and devs[0]["name"] == "gda_stub_0" and devs[0]["vendor_id"] == 0xfffe, devs
EOF
checks=$((checks + 1)); echo "ok  gda devices: model stub, device gda_stub_0 (vendor 0xfffe) named stub"

# ---- 2. the verbs-compatible library ----------------------------------------------------------
LD_LIBRARY_PATH="$verbs_lib" ibv_devices | grep -q gda_stub_0 || fail "ibv_devices does not list gda_stub_0"
checks=$((checks + 1)); echo "ok  ibv_devices lists gda_stub_0"
port=$((20000 + RANDOM % 20000))
LD_LIBRARY_PATH="$verbs_lib" timeout 60 ibv_rc_pingpong -d gda_stub_0 -g 1 -n 200 -p $port > "$tmp/srv.log" 2>&1 &
srv=$!
ok=0
for _ in $(seq 1 30); do
  sleep 0.3
  if LD_LIBRARY_PATH="$verbs_lib" timeout 60 ibv_rc_pingpong -d gda_stub_0 -g 1 -n 200 -p $port 127.0.0.1 > "$tmp/cli.log" 2>&1; then
    ok=1; break
  fi
  grep -q "Couldn't connect" "$tmp/cli.log" || break
done
wait $srv || ok=0
[ $ok = 1 ] && grep -q "200 iters in" "$tmp/cli.log" || fail "ibv_rc_pingpong on gda_stub_0: $(cat "$tmp/cli.log" "$tmp/srv.log")"
checks=$((checks + 1)); echo "ok  ibv_rc_pingpong on gda_stub_0: $(grep 'iters in' "$tmp/cli.log")"

# ---- 3. gda perf --provider stub --------------------------------------------------------------
out=$("$bin/gda" perf write --provider stub --sizes 64 --iters 500 --lat-iters 20 --repeat 1 --json)
echo "$out" | tail -1 | python3 -c 'import json,sys; r=json.loads(sys.stdin.read()); assert r["provider"].startswith("stub"), r' \
  || fail "gda perf --provider stub: $out"
checks=$((checks + 1)); echo "ok  gda perf --provider stub"

# ---- 4. the conformance suite -----------------------------------------------------------------
# The provider-generic tests in the stub's module (`stub::…`); `verbs::stub::…` need its
# hardware control path, which the stub does not have, and are not run.
mapfile -t tests < <(cargo test -q --features verbs --test conformance -- --list 2>/dev/null \
  | sed -n 's/^\(stub::.*\): test$/\1/p')
n=${#tests[@]}
[ "$n" -ge 10 ] || fail "conformance: only $n tests in module stub::"
out=$(cargo test -q --features verbs --test conformance -- --test-threads 2 --exact "${tests[@]}" 2>&1) \
  || fail "conformance stub::: $out"
passed=$(echo "$out" | sed -n 's/^test result: ok\. \([0-9]*\) passed.*/\1/p')
[ "$passed" = "$n" ] || fail "conformance stub::: $passed of $n passed: $out"
checks=$((checks + 1)); echo "ok  conformance: $passed of $n provider-generic tests passed in module stub::"

# ---- 5. the C ABI -----------------------------------------------------------------------------
cat > "$tmp/hello.c" <<'EOF'
#include <shmem.h>
#include <stdio.h>
int main(void) { shmem_init(); printf("pe %d of %d\n", shmem_my_pe(), shmem_n_pes()); shmem_finalize(); return 0; }
EOF
"$bin/gdacc" "$tmp/hello.c" -o "$tmp/hello"
out=$(GDA_SHMEM_TRANSPORT=rdma GDA_SHMEM_PROVIDER=stub "$bin/gdarun" -n 2 --grace 5 "$tmp/hello")
[ "$(echo "$out" | grep -c '^pe ')" = 2 ] || fail "the C ABI with GDA_SHMEM_PROVIDER=stub: $out"
checks=$((checks + 1)); echo "ok  C ABI: 2 PEs with GDA_SHMEM_PROVIDER=stub"

[ $checks = 6 ] || fail "$checks of 6 checks ran"
echo "new-provider: the stub vendor (its crate, one table line, its Cargo entries) is seen by every user of the table: 6 checks passed"
