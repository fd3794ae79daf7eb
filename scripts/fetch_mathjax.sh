#!/usr/bin/env bash
# Fetch MathJax 3 from the npm registry and lay it out for the book's html_extra_path.
#
# The book must render maths without any CDN. Sphinx's `mathjax_path` is relative
# to the built site's `_static/`, and `_config.yml` points it at
# `mathjax/tex-mml-chtml.js`; `html_extra_path` copies the folder written here into
# the root of the built site. So this script writes
#
#     <dest>/_static/mathjax/tex-mml-chtml.js   (+ fonts, lazily loaded components)
#
# with <dest> = build/mathjax_site by default (build/ is git-ignored). The source
# `book/_static/` is deliberately NOT used: jupyter-book injects every .js found
# there into every page.
#
# Idempotent: a second run with the same pinned version does nothing. The tarball
# is checked against a pinned sha512 before anything is unpacked, and the result is
# moved into place only when complete (a crash never leaves a half-written copy that
# a later run would count as done).
#
# Usage: scripts/fetch_mathjax.sh [DEST]
#   MATHJAX_TGZ=/path/to/mathjax-3.2.2.tgz  use a tarball already on disk (no npm)
set -euo pipefail

MATHJAX_VERSION="3.2.2"
MATHJAX_SHA512="06df9249553c7811b6ef30a155ec0e89c62ced7b1db78d2a9b8f94a47c97ee4d3f3bd36588f73ec7bee4d7f144b0fb2328f64626fb5164cd6f3be81e5b43a11b"

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dest="${1:-$repo_root/build/mathjax_site}"
target="$dest/_static/mathjax"
stamp="$target/.fetched"
want="mathjax@$MATHJAX_VERSION sha512:$MATHJAX_SHA512"

if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" && -f "$target/tex-mml-chtml.js" ]]; then
    echo "fetch_mathjax: mathjax@$MATHJAX_VERSION already in $target"
    exit 0
fi

mkdir -p "$dest"
work="$(mktemp -d "$dest/.fetch.XXXXXX")"
trap 'rm -rf "$work"' EXIT

if [[ -n "${MATHJAX_TGZ:-}" ]]; then
    tgz="$MATHJAX_TGZ"
else
    if ! command -v npm >/dev/null 2>&1; then
        echo "fetch_mathjax: npm not found. Install Node.js/npm (Debian: apt-get install -y npm)," \
             "or set MATHJAX_TGZ to a downloaded mathjax-$MATHJAX_VERSION.tgz" >&2
        exit 1
    fi
    (cd "$work" && npm pack --silent "mathjax@$MATHJAX_VERSION" --pack-destination "$work" >/dev/null)
    tgz="$work/mathjax-$MATHJAX_VERSION.tgz"
fi

got="$(sha512sum "$tgz" | cut -d' ' -f1)"
if [[ "$got" != "$MATHJAX_SHA512" ]]; then
    echo "fetch_mathjax: checksum mismatch for $tgz" >&2
    echo "  expected $MATHJAX_SHA512" >&2
    echo "  got      $got" >&2
    echo "  If the version was bumped on purpose, update MATHJAX_SHA512 in this script." >&2
    exit 1
fi

tar -xzf "$tgz" -C "$work"
es5="$work/package/es5"
stage="$work/mathjax"
mkdir -p "$stage"
# The combined TeX+MathML -> CommonHTML bundle, plus what it may load lazily:
# TeX extensions (\require, autoload), CHTML fonts (resolved relative to the
# script's own URL), the accessibility/menu components and the speech maps.
cp "$es5/tex-mml-chtml.js" "$stage/"
for sub in input output a11y ui sre adaptors; do
    cp -r "$es5/$sub" "$stage/"
done
cp "$work/package/LICENSE" "$stage/LICENSE"
echo "$want" > "$stage/.fetched"

rm -rf "$target"
mkdir -p "$(dirname "$target")"
mv "$stage" "$target"
echo "fetch_mathjax: mathjax@$MATHJAX_VERSION -> $target ($(du -sh "$target" | cut -f1))"
