import sys; sys.argv=[sys.argv[0]]
exec(open(__file__.replace('adaptive_rounds_bias2', 'adaptive_rounds_bias')).read().split("T = int")[0])
for sigma in (0.012, 0.02):
    print(f"sigma {sigma}: fixed 3v3  ", sim(sigma, 1.05, 3000, seed=11, fixed=3))
    print(f"sigma {sigma}: adaptive own ", sim(sigma, 1.05, 3000, seed=12))
    print(f"sigma {sigma}: adaptive case(3 impls)", sim(sigma, 1.05, 3000, points=3, seed=13))
