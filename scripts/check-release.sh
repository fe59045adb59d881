#!/usr/bin/env bash
# Runs the packaging half of a release, as .github/workflows/release.yml does it,
# in a temporary copy of the package, and publishes nothing:
#   1. puts each target's binary where the workflow's download step puts it
#      (artifacts/bindings-<target>/rabbit-retry.<platform>.node);
#   2. `napi artifacts`: copies them into npm/<platform>/;
#   3. `napi pre-publish -t npm --dry-run`, then for real with
#      `--skip-optional-publish --no-gh-release` (no npm publish, no GitHub release),
#      which writes the root package.json's optionalDependencies;
#   4. checks the result: one optionalDependencies entry per target in
#      package.json "napi.targets" at the package's version; each npm/<platform>
#      package's name, version, os/cpu/libc, main, files, engines and repository;
#      that npm would pack each binary; that the loader (binding.js) asks for each
#      package; and that the loader, installed beside this machine's platform
#      package, loads the binary from it.
#
# Usage: bash scripts/check-release.sh [DIR ...]
#   Binaries named rabbit-retry.<platform>.node are taken from the DIRs (default:
#   the repository root, where `napi build --platform --js binding.js --dts binding.d.ts --release` leaves them).
#   A target with no binary gets a small placeholder file, reported as such, so
#   that the commands can run; RR_ALL_TARGETS=1 makes a missing one an error.
#   KEEP=1 keeps the temporary copy.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

napi=$root/node_modules/.bin/napi
if [[ ! -x $napi ]]; then
  echo "check-release: $napi is missing; run 'npm ci' first" >&2
  exit 1
fi
(($# > 0)) || set -- "$root"

work=$(mktemp -d -t rabbit-retry-release-XXXXXX)
cleanup() {
  if [[ ${KEEP:-} == 1 ]]; then echo "kept $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT

pkg=$work/package
mkdir -p "$pkg"
cp package.json binding.js binding.d.ts LICENSE README.md "$pkg"/
cp -R npm "$pkg"/npm
rm -f "$pkg"/npm/*/*.node
ln -s "$root/node_modules" "$pkg/node_modules"
cd "$pkg"

# The targets and their npm/<platform> folders, as napi itself reads them.
# shellcheck disable=SC2016 # JavaScript in single quotes
mapfile -t targets < <(node --input-type=module -e '
  import { readNapiConfig } from "@napi-rs/cli";
  const { targets } = await readNapiConfig("package.json");
  for (const t of targets) console.log(`${t.triple} ${t.platformArchABI}`);
')
binary_name=$(node -p 'require("./package.json").napi.binaryName')

echo "== binaries"
: >"$work/sources"
for line in "${targets[@]}"; do
  read -r triple abi <<<"$line"
  file=$binary_name.$abi.node
  dest=artifacts/bindings-$triple
  mkdir -p "$dest"
  found=
  for dir in "$@"; do
    if [[ -f $dir/$file ]]; then
      found=$(cd "$dir" && pwd)/$file
      break
    fi
  done
  if [[ -n $found ]]; then
    cp "$found" "$dest/$file"
    echo "$abi real $found" >>"$work/sources"
    printf '  %-18s %s (%s bytes)\n' "$abi" "$found" "$(stat -c %s "$found")"
  else
    if [[ ${RR_ALL_TARGETS:-} == 1 ]]; then
      echo "check-release: no $file in $*" >&2
      exit 1
    fi
    echo "placeholder for $triple: not a binary" >"$dest/$file"
    echo "$abi placeholder" >>"$work/sources"
    printf '  %-18s placeholder (no %s in %s)\n' "$abi" "$file" "$*"
  fi
done

echo "== napi artifacts"
# It writes each binary to npm/<platform>/ and a copy beside package.json.
"$napi" artifacts 2>&1 | sed 's/\x1b\[[0-9;]*m//g' | sed -n "s|^ *INFO  Write \[$pkg/\(.*\)\] to \[$pkg/\(npm/.*\)\]|  \1 -> \2|p"

echo "== napi pre-publish -t npm --dry-run --no-gh-release"
"$napi" pre-publish -t npm --dry-run --no-gh-release
cmp -s package.json "$root/package.json" || { echo "check-release: --dry-run changed package.json" >&2; exit 1; }
echo "  validated every npm/<platform> package; package.json unchanged"

echo "== napi pre-publish -t npm --skip-optional-publish --no-gh-release"
"$napi" pre-publish -t npm --skip-optional-publish --no-gh-release
diff -u "$root/package.json" package.json | sed -n '/^[-+][^-+]/s/^/  /p' || true

# The release workflow removes the root copies `napi artifacts` makes before it
# publishes rabbit-retry: the binaries ship in the platform packages.
rm -f ./"$binary_name".*.node

echo "== checks"
# shellcheck disable=SC2016 # JavaScript in single quotes
SOURCES=$work/sources node --input-type=module -e '
  import { readNapiConfig } from "@napi-rs/cli";
  import { readFileSync, existsSync, mkdirSync, cpSync } from "node:fs";
  import { createHash } from "node:crypto";
  import { execFileSync } from "node:child_process";
  import { join } from "node:path";
  import { createRequire } from "node:module";

  const problems = [];
  const check = (ok, what) => { if (!ok) problems.push(what); };
  const json = (p) => JSON.parse(readFileSync(p, "utf8"));
  const sha = (p) => createHash("sha256").update(readFileSync(p)).digest("hex");
  const same = (a, b) => JSON.stringify(a) === JSON.stringify(b);

  const { targets, packageName, binaryName } = await readNapiConfig("package.json");
  const root = json("package.json");
  const sources = new Map(readFileSync(process.env.SOURCES, "utf8").trim().split("\n")
    .map((l) => l.split(" ")).map(([abi, kind, path]) => [abi, { kind, path }]));
  const loader = readFileSync("binding.js", "utf8");
  const repo = root.repository?.url;

  const optional = root.optionalDependencies ?? {};
  const wanted = Object.fromEntries(targets.map((t) => [`${packageName}-${t.platformArchABI}`, root.version]));
  check(same(Object.keys(optional).sort(), Object.keys(wanted).sort()),
    `optionalDependencies ${JSON.stringify(optional)} is not one entry per target ${JSON.stringify(wanted)}`);
  console.log(`  package.json optionalDependencies (${Object.keys(optional).length} for ${targets.length} targets):`);

  for (const t of targets) {
    const abi = t.platformArchABI;
    const name = `${packageName}-${abi}`;
    const file = `${binaryName}.${abi}.node`;
    const dir = join("npm", abi);
    const p = json(join(dir, "package.json"));
    check(optional[name] === root.version, `optionalDependencies.${name} is ${optional[name]}, not ${root.version}`);
    check(p.name === name, `${dir}: name ${p.name}, not ${name}`);
    check(p.version === root.version, `${dir}: version ${p.version}, not ${root.version}`);
    check(same(p.os, [t.platform]), `${dir}: os ${JSON.stringify(p.os)}, not ["${t.platform}"]`);
    check(same(p.cpu, [t.arch]), `${dir}: cpu ${JSON.stringify(p.cpu)}, not ["${t.arch}"]`);
    const libc = t.abi === "gnu" ? ["glibc"] : t.abi === "musl" ? ["musl"] : undefined;
    check(same(p.libc, libc), `${dir}: libc ${JSON.stringify(p.libc)}, not ${JSON.stringify(libc)}`);
    check(p.main === file, `${dir}: main ${p.main}, not ${file}`);
    check(same(p.files, [file]), `${dir}: files ${JSON.stringify(p.files)}, not ["${file}"]`);
    check(p.engines?.node === root.engines?.node, `${dir}: engines.node ${p.engines?.node}, not ${root.engines?.node} as package.json`);
    check(typeof p.repository?.url === "string" && p.repository.url.length > 0, `${dir}: no repository.url (npm provenance needs it)`);
    if (repo) check(p.repository?.url === repo, `${dir}: repository.url ${p.repository?.url}, package.json has ${repo}`);
    check(loader.includes(`require(\x27${name}\x27)`), `binding.js never requires ${name}`);
    check(loader.includes(`require(\x27${name}/package.json\x27).version`), `binding.js never reads ${name}/package.json`);

    const packed = JSON.parse(execFileSync("npm", ["pack", "--dry-run", "--json", "--ignore-scripts"], { cwd: dir, encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] }))[0];
    const packedFiles = packed.files.map((f) => f.path).sort();
    check(packedFiles.includes(file) && packedFiles.includes("package.json"), `${dir}: npm would pack ${JSON.stringify(packedFiles)}`);

    const src = sources.get(abi);
    let binary = "placeholder";
    if (src?.kind === "real") {
      check(existsSync(join(dir, file)) && sha(join(dir, file)) === sha(src.path), `${dir}/${file} is not the binary from ${src.path}`);
      binary = `${file} ${sha(join(dir, file)).slice(0, 12)} = ${src.path}`;
    }
    console.log(`    "${name}": "${optional[name]}"  os=${p.os} cpu=${p.cpu}${p.libc ? ` libc=${p.libc}` : ""} engines=${p.engines?.node}  packs ${packed.entryCount} files, ${packed.size} bytes  [${binary}]`);
  }
  if (!repo) console.log("  note: package.json has no repository field; the release workflow sets it from the repository it runs in (npm provenance needs it)");
  check(loader.includes(`expected ${root.version} but got`), `binding.js was generated for another version than ${root.version}`);

  // The root tarball as the workflow publishes it (dist/ is built there, not here).
  const rootPacked = JSON.parse(execFileSync("npm", ["pack", "--dry-run", "--json", "--ignore-scripts"], { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] }))[0];
  const nodeFiles = rootPacked.files.map((f) => f.path).filter((f) => f.endsWith(".node"));
  check(nodeFiles.length === 0, `the root package would carry ${nodeFiles.join(", ")}`);
  console.log(`  ${packageName} packs ${rootPacked.entryCount} files (before dist/), no .node file`);

  // Installed as npm lays it out: the loader beside the platform package of this machine.
  const host = targets.find((t) => sources.get(t.platformArchABI)?.kind === "real" && t.platform === process.platform && t.arch === process.arch
    && (t.platform !== "linux" || (t.abi === "musl") === (process.report.getReport().header.glibcVersionRuntime === undefined)));
  if (host) {
    const app = join(process.cwd(), "..", "app");
    const modules = join(app, "node_modules");
    mkdirSync(join(modules, packageName), { recursive: true });
    cpSync("binding.js", join(modules, packageName, "binding.js"));
    cpSync("package.json", join(modules, packageName, "package.json"));
    cpSync(join("npm", host.platformArchABI), join(modules, `${packageName}-${host.platformArchABI}`), { recursive: true });
    const req = createRequire(join(app, "main.js"));
    const binding = req(join(modules, packageName, "binding.js"));
    const loaded = Object.keys(req.cache).filter((f) => f.endsWith(".node"));
    check(typeof binding.connect === "function", "the installed loader gave no connect()");
    check(loaded.length === 1 && loaded[0].includes(join("node_modules", `${packageName}-${host.platformArchABI}`)), `the installed loader loaded ${JSON.stringify(loaded)}`);
    console.log(`  installed loader on ${process.platform}-${process.arch} loaded ${loaded[0].slice(loaded[0].indexOf("node_modules"))}`);
  } else {
    console.log(`  no real binary for this machine (${process.platform}-${process.arch}): the installed-loader check was skipped`);
  }

  if (problems.length) {
    for (const p of problems) console.error(`  PROBLEM: ${p}`);
    process.exit(1);
  }
'
placeholders=$(grep -c ' placeholder$' "$work/sources" || true)
echo "check-release: ok (${#targets[@]} targets, $((${#targets[@]} - placeholders)) real binaries, $placeholders placeholders)"
