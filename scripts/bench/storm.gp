# The start storm from scripts/bench.sh's storm.dat: for each server x strategy, how many of the
# contenders have exited by each moment after their common start (one block per cell, its
# first line the cell's name).
# gnuplot -e "datafile='storm.dat'; outfile='storm.png'; subtitle='...'" storm.gp
set terminal pngcairo size 1000,520 font "sans,10"
set output outfile
set title "dblock start storm: contenders exited since their common start\n{/*0.8 ".subtitle."}"
set xlabel "s since the start"
set ylabel "contenders exited"
set grid
set xrange [0:*]
set key left top noenhanced
set arrow from 10, graph 0 to 10, graph 1 nohead dt 2 lc rgb "red"
set label "goal: all but the winner by 10 s" at 10.2, graph 0.05 tc rgb "red"
plot for [i=0:*] datafile index i using 1:2 with steps lw 2 title columnheader(1)
