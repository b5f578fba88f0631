#!/usr/bin/env bash
# The Lean project that checks minif2f proofs, at the task's pinned versions (minif2f.yaml, metadata):
# Lean leanprover/lean4:v4.24.0 and Mathlib tag v4.24.0 with its compiled cache. Needs the internet (elan,
# GitHub, Mathlib's cache): run it once on such a machine, then copy the folder where runs happen.
#
#   bash tasks/minif2f/setup_lean.sh [FOLDER]     # default FOLDER: ~/minif2f_check
#   export REPLAYBENCH_LEAN_PROJECT=FOLDER        # what it prints at the end
#   replaybench doctor                            # checks the toolchain and Mathlib against the task's
set -euo pipefail

LEAN_TOOLCHAIN="leanprover/lean4:v4.24.0"
MATHLIB_TAG="v4.24.0"
REPL_TAG="v4.24.0"  # the REPL tags its releases by the Lean version they build with
PROJECT="${1:-$HOME/minif2f_check}"

if ! command -v lake >/dev/null && [ ! -x "$HOME/.elan/bin/lake" ]; then
    echo "installing elan (the Lean toolchain manager) into ~/.elan"
    curl -sSfL https://raw.githubusercontent.com/leanprover/elan/master/elan-init.sh \
        | sh -s -- -y --default-toolchain none
fi
export PATH="$HOME/.elan/bin:$PATH"

mkdir -p "$PROJECT"
cd "$PROJECT"
echo "$LEAN_TOOLCHAIN" > lean-toolchain
cat > lakefile.toml <<EOF
name = "minif2f_check"
defaultTargets = []

[[require]]
name = "mathlib"
git = "https://github.com/leanprover-community/mathlib4"
rev = "$MATHLIB_TAG"

# the Lean REPL that LeanInteract drives (REPLAYBENCH_LEAN_MODE=repl, the default once it is built)
[[require]]
name = "REPL"
git = "https://github.com/leanprover-community/repl"
rev = "$REPL_TAG"
EOF
lake update           # resolves Mathlib and the REPL at their tags, writes lake-manifest.json
lake exe cache get    # Mathlib's compiled files, instead of hours of building
(cd .lake/packages/REPL && lake build repl)  # .lake/packages/REPL/.lake/build/bin/repl
echo 'import Mathlib
example : (2 : ℕ) + 2 = 4 := by norm_num' > Check.lean
lake env lean Check.lean  # Mathlib loads and a proof checks
echo '{"cmd": "example : (2 : Nat) + 2 = 4 := by decide"}' | lake env .lake/packages/REPL/.lake/build/bin/repl  # the REPL answers

echo "done: export REPLAYBENCH_LEAN_PROJECT=$PROJECT, then run \`replaybench doctor\`"
