#!/usr/bin/env bash
# scripts/qgate-ncu-stalls (ctest qgate_ncu_stalls) on a small CSV in the layout of ncu's source page:
# the sums, the stall shares, the opcodes without predicates or modifiers, the hottest line first,
# the same figures as JSON, and exit 2 with a message for a missing file, a CSV that is not ncu's
# source page, and one taken without the source counters.
# Usage: ncu_stalls_test.sh SOURCE_DIR WORK_DIR
set -euo pipefail
src=$1 work=$2
tool=$src/scripts/qgate-ncu-stalls
rm -rf "$work"
mkdir -p "$work"
failed=0
check() { if eval "$1"; then echo "ok   $2"; else echo "FAIL $2"; failed=1; fi; }

cat >"$work/source.csv" <<'CSV'
"Kernel Name","void k<(int)2>(int)",
"Address","Source","Warp Stall Sampling (All Samples)","Warp Stall Sampling (Not-issued Samples)","# Samples","Instructions Executed","stall_long_sb","stall_selected","stall_math","stall_long_sb (Not Issued)"
"0x7f0000000010","      I2FP.F32.S32 R8, R57","10","8","10","5734","2","6","2","2"
"0x7f0000000020","      @!P0  BRA 0x7f0000000010","30","30","30","27","30","0","0","30"
"0x7f0000000030","      FFMA R1, R2, R3, R1","0","0","0","5734","0","0","0","0"
CSV
python3 "$tool" "$work/source.csv" --top 2 >"$work/out.txt"
check 'grep -q "^kernel: void k<(int)2>(int)$" "$work/out.txt"' "the kernel's name"
check 'grep -q "^instructions executed (warp): 11495  samples: 40$" "$work/out.txt"' "instructions and samples summed over the lines"
check 'grep -q "^stall reasons: long_sb 80.0%, selected 15.0%, math 5.0%$" "$work/out.txt"' "stall reasons as shares of all samples, not-issued columns left out"
check 'grep -q "^opcodes by executed: I2FP 49.9%, FFMA 49.9%, BRA 0.2%$" "$work/out.txt"' "opcodes without predicate or modifiers"
check '[ "$(sed -n "/^--- lines/{n;p}" "$work/out.txt" | cut -c1-12)" = "00020     30" ]' "the line with the most samples comes first"
check '[ "$(grep -c "^000" "$work/out.txt")" -eq 2 ]' "--top limits the lines"
python3 "$tool" "$work/source.csv" --json >"$work/out.json"
check 'python3 -c "
import json
s = json.load(open(\"$work/out.json\"))
assert s[\"instructions_executed\"] == 11495 and s[\"samples\"] == 40, s
assert s[\"stall_reasons_pct\"] == {\"long_sb\": 80.0, \"selected\": 15.0, \"math\": 5.0}, s
assert s[\"hot_lines\"][0][\"top_reasons\"] == [[\"long_sb\", 30]], s
"' "--json gives the same figures"

set +e
python3 "$tool" "$work/none.csv" 2>"$work/e1.txt"; rc1=$?
printf 'a,b\n1,2\n' >"$work/other.csv"
python3 "$tool" "$work/other.csv" 2>"$work/e2.txt"; rc2=$?
printf '"Address","Source","Instructions Executed"\n"0x1","NOP","1"\n' >"$work/nosamples.csv"
python3 "$tool" "$work/nosamples.csv" 2>"$work/e3.txt"; rc3=$?
set -e
check '[ $rc1 -eq 2 ] && grep -q "cannot read" "$work/e1.txt"' "a missing file is refused"
check '[ $rc2 -eq 2 ] && grep -q "is not ncu" "$work/e2.txt"' "a CSV that is not ncu's source page is refused"
check '[ $rc3 -eq 2 ] && grep -q "SourceCounters" "$work/e3.txt"' "a report without the source counters is refused, naming the section"
exit $failed
