#!/usr/bin/env bash
# `genscope comfyui install|uninstall COMFYUI_DIR`: link or copy, idempotent, named errors,
# never touches a custom_nodes/genscope_comfyui that it did not make.
set -euo pipefail
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
pkg=$GENSCOPE_SOURCE_DIR/integrations/comfyui
export GENSCOPE_COMFYUI_PACKAGE=$pkg  # not an installed copy a setup may have put in /usr/local
app=$tmp/ComfyUI
mkdir -p "$app/custom_nodes"; touch "$app/main.py"
target=$app/custom_nodes/genscope_comfyui

"$GENSCOPE" comfyui install "$app" | grep -q "installed: $target -> " || fail "install (link)"
[ -L "$target" ] && [ -f "$target/recorder.py" ] || fail "the link points at the package"
[ "$(readlink "$target")" = "$(cd "$pkg" && pwd -P)" ] || fail "link target: $(readlink "$target")"
"$GENSCOPE" comfyui install "$app" | grep -q "already installed" || fail "install twice"
"$GENSCOPE" comfyui install "$app" --copy | grep -q "a copy of" || fail "link -> copy"
[ -d "$target" ] && [ ! -L "$target" ] && [ -f "$target/.genscope-comfyui-copy" ] || fail "copy made"
[ -f "$target/plugin.py" ] && [ ! -e "$target/tests" ] || fail "copy has the package, not its tests"
"$GENSCOPE" comfyui install "$app" --copy | grep -q "a copy of" || fail "copy again (refresh)"
"$GENSCOPE" comfyui uninstall "$app" | grep -q "uninstalled" || fail "uninstall copy"
[ ! -e "$target" ] || fail "copy removed"
"$GENSCOPE" comfyui uninstall "$app" | grep -q "not installed" || fail "uninstall twice"
"$GENSCOPE" comfyui install "$app" --source "$pkg" >/dev/null || fail "--source"
"$GENSCOPE" comfyui uninstall "$app" >/dev/null && [ ! -e "$target" ] || fail "uninstall link"
[ -d "$pkg" ] && [ -f "$pkg/__init__.py" ] || fail "uninstalling a link leaves the package alone"

# Installed: the package is found beside the installed binary (<prefix>/share/genscope/comfyui).
cmake --install "$GENSCOPE_BUILD_DIR" --component comfyui --prefix "$tmp/stage" >/dev/null
mkdir -p "$tmp/stage/bin"; cp "$GENSCOPE" "$tmp/stage/bin/genscope"
[ -f "$tmp/stage/share/genscope/comfyui/recorder.py" ] && [ ! -e "$tmp/stage/share/genscope/comfyui/tests" ] ||
  fail "cmake --install --component comfyui installs the package without its tests"
env -u GENSCOPE_COMFYUI_PACKAGE "$tmp/stage/bin/genscope" comfyui install "$app" >/dev/null
[ "$(readlink "$target")" = "$tmp/stage/share/genscope/comfyui" ] || fail "installed copy: $(readlink "$target")"
"$GENSCOPE" comfyui uninstall "$app" >/dev/null

set +e
out=$("$GENSCOPE" comfyui install "$tmp/nothing" 2>&1); rc=$?
[ $rc -eq 2 ] && grep -q "\[NotComfyUI\]" <<<"$out" || fail "not ComfyUI: rc=$rc $out"
out=$("$GENSCOPE" comfyui install "$app" --source "$tmp" 2>&1); rc=$?
[ $rc -eq 2 ] && grep -q "\[PackageNotFound\]" <<<"$out" || fail "bad --source: rc=$rc $out"
mkdir "$target"; echo mine > "$target/file"
out=$("$GENSCOPE" comfyui install "$app" 2>&1); rc=$?
[ $rc -eq 2 ] && grep -q "\[TargetExists\]" <<<"$out" || fail "foreign folder: rc=$rc $out"
out=$("$GENSCOPE" comfyui uninstall "$app" 2>&1); rc=$?
[ $rc -eq 2 ] && grep -q "\[TargetNotOurs\]" <<<"$out" || fail "foreign uninstall: rc=$rc $out"
[ "$(cat "$target/file")" = mine ] || fail "a foreign folder is left alone"
# selftest: refusals before anything starts (the real runs: tests/peers/comfyui_selftest.sh).
out=$("$GENSCOPE" comfyui selftest "$tmp/nothing" --source "$pkg" 2>&1); rc=$?
[ $rc -eq 2 ] && grep -q "\[NotComfyUI\]" <<<"$out" || fail "selftest not ComfyUI: rc=$rc $out"
out=$("$GENSCOPE" comfyui selftest "$app" --source "$pkg" --python "$tmp/no-python" 2>&1); rc=$?
[ $rc -eq 2 ] && grep -q "\[ExecFailed\]" <<<"$out" || fail "selftest without python: rc=$rc $out"
set -e
echo "comfyui install: ok"
