"""aggregate.py TAG: the versions.sh rounds in out/TAG.v{26,32}.r*.txt as a markdown table
(median of the round medians, min-max of the round medians, implementations, layouts)."""
import sys, glob, statistics as st, collections
tag = sys.argv[1]
d = collections.OrderedDict()
for v in ("26", "32"):
    for f in sorted(glob.glob(f"out/{tag}.v{v}.r*.txt")):
        for l in open(f):
            if not l.startswith("RES|"): continue
            _, c, lay, what, impl, tg, med, mn = l.strip().split("|")
            k = (c, lay, what)
            e = d.setdefault(k, {}).setdefault(v, {"med": [], "min": [], "impl": set(), "tag": set()})
            e["med"].append(float(med)); e["min"].append(float(mn)); e["impl"].add(impl); e["tag"].add(tg)
print("| case | layout | what | 2.6 us med (spread) | 3.2 us med (spread) | 3.2/2.6 | 2.6 impl | 3.2 impl | tag 2.6 / 3.2 | min 2.6 / 3.2 |")
print("|---|---|---|---|---|---|---|---|---|---|")
for (c, lay, what), e in d.items():
    def fmt(v):
        x = e.get(v)
        if not x: return "-", None
        m = st.median(x["med"])
        return f"{m:.1f} ({min(x['med']):.1f}-{max(x['med']):.1f})", m
    s26, m26 = fmt("26"); s32, m32 = fmt("32")
    r = f"{m32/m26:.2f}" if m26 and m32 else "-"
    im = lambda v: ",".join(sorted(e[v]["impl"])) if v in e else "-"
    tg = lambda v: ",".join(sorted(e[v]["tag"])) if v in e else "-"
    mn = lambda v: f"{min(e[v]['min']):.1f}" if v in e else "-"
    print(f"| {c} | {lay} | {what.replace('reorder_','reo ')} | {s26} | {s32} | {r} | {im('26')} | {im('32')} | {tg('26')} / {tg('32')} | {mn('26')} / {mn('32')} |")
