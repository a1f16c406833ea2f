# Handoff latency per backend x strategy and peer, from scripts/bench.sh's handoff.dat
# ("label" median min max, in ms): bars at the median, whiskers from min to max.
# gnuplot -e "datafile='handoff.dat'; outfile='handoff.png'; subtitle='...'" handoff.gp
set terminal pngcairo size 1000,520 font "sans,10"
set output outfile
set title "dblock handoff: holder's command ends -> waiter's command starts\n{/*0.8 ".subtitle."}"
set ylabel "ms (log scale; bar = median, whisker = min-max)"
set logscale y
set yrange [0.1:*]
set grid ytics
set style fill solid 0.6 border -1
set boxwidth 0.6
set xtics rotate by -30 left noenhanced
set key off
set bmargin 6
plot datafile using 0:2:xtic(1) with boxes lc rgb "#4e79a7", \
     '' using 0:2:3:4 with yerrorbars lc rgb "black" pt 0, \
     '' using 0:4:(sprintf("%.1f", $2)) with labels offset 0,0.8 font "sans,8"
