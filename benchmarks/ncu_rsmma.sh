#!/usr/bin/env bash
# Where rsmma's MMA warps wait (NOTES.md row 69): ncu's stall reasons (cycles per issued instruction, by
# reason) and the SASS lines that collect the samples, for the table's pick at keys the unpack holds,
# on the base layout and on frag32. Source benchmarks/device_setup.sh first; logs in $OUT.
#   bash benchmarks/ncu_rsmma.sh "rsmma.bm8.bn64.bk128.sk1.w4.s6.c3:1x4096x22016 ..."
for job in $1; do
  v=${job%%:*}; key=${job##*:}
  for layout in base frag32; do
    arg=$([ $layout = base ] || echo $layout)
    name=ncu_rsmma_${layout}_${key}
    timeout 150 ncu --clock-control none -k regex:rsmma --launch-skip 3 --launch-count 1 \
      --section WarpStateStats --section SchedulerStats --section Occupancy --section SourceCounters \
      --metrics regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio \
      -o $OUT/$name python3 benchmarks/ncu_target.py $v $key $arg > $OUT/$name.log 2>&1
    echo "$layout $key $v rc=$?"
    ncu -i $OUT/$name.ncu-rep --page details --print-details all > $OUT/$name.txt 2>&1
    ncu -i $OUT/$name.ncu-rep --page source --print-source sass --csv > $OUT/${name}_sass.csv 2>&1
    grep -E "Warp Cycles Per Issued|Issue Slots Busy|No Eligible|Achieved Occupancy|Duration" $OUT/$name.txt | sed 's/  */ /g' | head -6
    grep -E "issue_stalled" $OUT/$name.txt | sed 's/  */ /g' | sort -k3 -g -r | awk '$NF+0 > 0.3' | head -8
  done
done
