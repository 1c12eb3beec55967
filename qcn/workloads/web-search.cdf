# Flow sizes of DCTCP's web-search workload (Alizadeh et al., "Data Center TCP (DCTCP)",
# SIGCOMM 2010, figure 4), as HPCC's traffic generator ships it
# (alibaba-edu/High-Precision-Congestion-Control, traffic_gen/WebSearch_distribution.txt,
# percentages there, fractions here).  Mean 1.71 MB, largest 30 MB.
# bytes  cdf
0         0
10000     0.15
20000     0.20
30000     0.30
50000     0.40
80000     0.53
200000    0.60
1000000   0.70
2000000   0.80
5000000   0.90
10000000  0.97
30000000  1
