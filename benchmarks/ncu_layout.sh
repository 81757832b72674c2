#!/usr/bin/env bash
# ncu of the shipped swapab (base layout) against the k16 experiment at M=8 and M=16 (NOTES row 29:
# k16 gains at M <= 8, loses 13-19% at M=16). Source benchmarks/device_setup.sh first; logs in $OUT.
v=swapab.bm16.bn64.bk128.sk4.w2.s4
for m in 8 16; do
  for layout in base k16; do
    arg=$([ $layout = base ] || echo $layout)
    timeout 120 ncu --clock-control none -k regex:swapab --launch-skip 3 --launch-count 1 \
      --section SpeedOfLight --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables \
      --section SchedulerStats --section WarpStateStats --section Occupancy --section LaunchStats \
      python3 benchmarks/ncu_target.py $v ${m}x4096x11008 $arg > $OUT/ncu_${layout}_m${m}.txt 2>&1
    echo "$layout M=$m rc=$?"
    grep -E "^\s+(Duration|DRAM Throughput|L1/TEX Hit|L2 Hit|Mem Busy|Max Bandwidth|Issue Slots Busy|Achieved Occupancy|Registers Per|Warp Cycles Per Issued|No Eligible|L1/TEX Cache Throughput|L2 Cache Throughput)" $OUT/ncu_${layout}_m${m}.txt | sed 's/  */ /g'
    grep -iE "stall|uncoalesced|bank|excessive|sectors" $OUT/ncu_${layout}_m${m}.txt | head -6 | cut -c1-220
  done
done
