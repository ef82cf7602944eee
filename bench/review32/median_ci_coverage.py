import math
from math import comb
z=1.959963984540054
def cov(n, r, t):  # 1-based order stats
    r=max(r,1); t=min(t,n)
    return sum(comb(n,i) for i in range(r, t))/2**n
rows=[]
below_code=below_conv=0
for n in range(10,301):
    h=z*math.sqrt(n)/2
    # the code before the thirty-second session: 0-based j,k -> 1-based j+1,k+1 (now it is Conover's, below)
    j=max(math.floor(n/2-h),0); k=min(math.ceil(n/2+h),n-1)
    c_code=cov(n,j+1,k+1)
    # Conover 1-based r=floor(n/2-h), s=ceil(1+n/2+h)
    r=math.floor(n/2-h); s=math.ceil(1+n/2+h)
    c_conv=cov(n,r,s)
    below_code+= c_code<0.95; below_conv+= c_conv<0.95
    if n in (10,11,16,21,26,31,50,100,200,300): print(n,"code",(j+1,k+1),round(c_code,4),"conover",(r,s),round(c_conv,4), "symmetric? code lo-dist",(j+1)-1,"hi-dist",n-(k+1))
print("n in 10..300 with coverage<.95: before",below_code,"conover (now solbench.analysis.stats.median_ci)",below_conv)
