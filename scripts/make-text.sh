#!/usr/bin/env bash
# Writes a small English text for the `text` data kind (resources/examples/gpt_text.json): the
# licence texts every Debian system ships in /usr/share/common-licenses, concatenated in name
# order (regular files only: the GPL -> GPL-3 style links would repeat texts). No download.
# Usage: scripts/make-text.sh [OUT]   (default data/licenses.txt)
set -euo pipefail

out=${1:-data/licenses.txt}
src=/usr/share/common-licenses
if [[ ! -d $src ]]; then
  echo "make-text: $src does not exist (it comes with Debian's base-files package)" >&2
  exit 1
fi
mapfile -t files < <(find "$src" -maxdepth 1 -type f -print | LC_ALL=C sort)
if ((${#files[@]} == 0)); then
  echo "make-text: no licence texts in $src" >&2
  exit 1
fi
mkdir -p "$(dirname "$out")"
cat "${files[@]}" > "$out.tmp"
mv "$out.tmp" "$out"
echo "make-text: $out ($(wc -c < "$out") bytes from ${#files[@]} files in $src)"
