#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# check-layers.sh - the library's layers call in one direction only:
#   api -> kind -> engine -> net -> core
# Each source file may include its own layer's headers and the header of the
# layer right below it (which brings the lower ones); never a header of a
# layer above, and nothing from a sibling layer's internals. Prints each
# offending #include and exits non-zero if there is one.
set -euo pipefail
cd "$(dirname "$0")/../src"

order=(core net engine kind api)
rank() { local i; for i in "${!order[@]}"; do [ "${order[$i]}" = "$1" ] && echo "$i" && return; done; echo -1; }

bad=0
for file in */*.c */*.h; do
    layer=${file%%/*}
    mine=$(rank "$layer")
    if [ "$mine" -lt 0 ]; then
        echo "check-layers: $file: folder '$layer' is not a layer (${order[*]})"; bad=1; continue
    fi
    while IFS= read -r inc; do
        case "$inc" in
            ../*/*) target=${inc#../}; target=${target%%/*} ;;
            *) continue ;; # this layer's own header, or rlock.h
        esac
        theirs=$(rank "$target")
        if [ "$theirs" -ne $((mine - 1)) ]; then
            below=nothing; [ "$mine" -gt 0 ] && below=${order[$((mine - 1))]}
            echo "check-layers: $file includes \"$inc\": $layer may include only $below"
            bad=1
        fi
    done < <(sed -n 's/^#include "\(.*\)"/\1/p' "$file")
done
[ "$bad" -eq 0 ] && echo "check-layers: ${order[*]}: every #include goes one layer down or stays in its layer"
exit "$bad"
