# Handoff latency per backend x strategy and peer, from scripts/bench.sh's handoff.dat
# ("label" median min max group, in ms; group 1 SQLite, 2 MariaDB, 3 PostgreSQL, 4 peers):
# bars at the median, one colour per group, whiskers from min to max.
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
colour(g) = (g == 1 ? 0x4e79a7 : g == 2 ? 0xf28e2b : g == 3 ? 0x59a14f : 0x9c9c9c)
plot datafile using 0:2:(colour($5)):xtic(1) with boxes lc rgb variable, \
     '' using 0:2:3:4 with yerrorbars lc rgb "black" pt 0, \
     '' using 0:4:(sprintf("%.1f", $2)) with labels offset 0,0.8 font "sans,8"
