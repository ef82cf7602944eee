"""Independent hand count of FLOPs and fused bytes of every shipped solbench case.

Nothing here imports solbench: shapes are typed in from the workload descriptions (model architecture),
not read from their `ops:` lists. FLOP = 2 x MAC on tensor units.
Vector FLOPs use solbench's documented per-element constants (add/mul/relu/bias/elementwise 1,
softmax 5, layernorm 8, gelu 8, batchnorm 2, copy 0, pool r*s per output) so they can be compared;
they never set T_SOL in these cases (checked below).
"""
from __future__ import annotations

B = {"bfloat16": 2, "float16": 2, "float32": 4, "fp8": 1}

# research note hardware-specs.md section 1 (dense TFLOP/s, TB/s); vector bf16: H200 spec 133.8
PEAKS = {
    "h200": dict(bf16=989.4e12, fp16=989.4e12, fp8=1978.9e12, vec_bf16=133.8e12, vec_fp32=66.9e12, bw=4.8e12,
                 link=450e9),
    "b200": dict(bf16=2250e12, fp16=2250e12, fp8=4500e12, vec_bf16=75e12, vec_fp32=75e12, bw=8.0e12, link=900e9),
}


def cases():
    out = []  # (workload, case_id-ish, dtype, tensor_flops, vector_flops, fused_bytes, bus_bytes, per-impl extras)
    # ---- attn.yaml: o_proj  out = x @ w.T + residual
    for t in (1, 16, 64, 2048, 16384):
        for dt in ("bfloat16", "float16"):
            h = 4096
            e = B[dt]
            flops = 2 * t * h * h
            vec = t * h  # residual add
            by = e * (t * h + h * h + t * h + t * h)  # x, w, residual, out
            fp8_by = by - h * h * (e - 1)  # fp8 / fp8_dynamic impls read w as 1-byte e4m3
            out.append(("o_proj", f"tokens={t},hidden={h},{dt}", dt, flops, vec, by, 0,
                        {"fp8": ("fp8", fp8_by), "fp8_dynamic": ("fp8", fp8_by)}))
    # o_proj_fp8w: w fp8 [h,h], w_scale fp32 [h]
    for t in (1, 16, 64):
        for dt in ("bfloat16", "float16"):
            h = 4096
            e = B[dt]
            by = e * 3 * t * h + 1 * h * h + 4 * h
            out.append(("o_proj_fp8w", f"tokens={t},hidden={h},{dt}", dt, 2 * t * h * h, t * h, by, 0, {}))
    # qkv_proj: GQA 32 q heads, 8 kv heads x 128 -> N = 4096 + 2*1024
    for t in (16, 2048, 16384):
        h, kv = 4096, 1024
        e = 2
        flops = 2 * t * h * h + 2 * (2 * t * kv * h)
        by = e * (t * h + h * h + 2 * kv * h + t * h + 2 * t * kv)
        out.append(("qkv_proj", f"tokens={t},hidden={h},kv_hidden={kv},bfloat16", "bfloat16", flops, 0, by, 0, {}))
    # ---- bert.yaml: bert_layer (post-LN BERT-base)
    for s in (128, 512):
        for dt in ("bfloat16", "float16"):
            b, h, nh, f = 32, 768, 12, 3072
            e = B[dt]
            T = b * s
            d = h // nh
            qkv = 3 * 2 * T * h * h
            attn = 2 * b * nh * s * s * d * 2  # QK^T and PV
            oproj = 2 * T * h * h
            ffn = 2 * T * h * f * 2
            flops = qkv + attn + oproj + ffn
            # vector (solbench constants): bias adds 3h + h + f + h per token, scale+softmax (1+5)*b*nh*s*s,
            # 2 residual adds, 2 LN x8, gelu x8, head-split copies 0
            vec = T * (3 * h + h + f + h) + 6 * b * nh * s * s + 2 * T * h + 2 * 8 * T * h + 8 * T * f
            params = (3 * h * h + 3 * h) + (h * h + h) + 2 * h + (f * h + f) + (h * f + h) + 2 * h
            by = e * (2 * T * h + params)
            case = f"batch={b},seq={s},hidden={h},heads={nh},ffn={f},{dt}"
            out.append(("bert_layer", case, dt, flops, vec, by, 0, {}))
    for h in (768, 4096):
        t = 16384
        by = 2 * (4 * t * h + 2 * h)  # x, residual, out, summed; weight, bias
        out.append(("residual_layernorm", f"tokens={t},hidden={h},bfloat16", "bfloat16", 0, t * h * (1 + 8), by, 0, {}))
    for t, h, f in ((16384, 768, 3072), (16384, 4096, 16384)):
        by = 2 * (t * h + f * h + f + t * f)
        out.append(("bias_gelu_matmul", f"tokens={t},hidden={h},ffn={f},bfloat16", "bfloat16", 2 * t * f * h,
                    t * f * (1 + 8), by, 0, {}))
    # ---- collectives.yaml (per rank, 2 ranks)
    for mib in (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024):
        n = mib * 2**20 // 2
        S = 2 * n
        out.append(("allreduce", f"mib={mib},bfloat16", "bfloat16", 0, n / 2, 2 * S, S * 2 * (2 - 1) / 2, {}))
    for k in (2048, 8192):
        m = nn = 8192
        by = 2 * (m * k + k * nn + m * nn)
        out.append(("gemm_allreduce", f"m={m},n={nn},k={k},chunks=4,bfloat16", "bfloat16", 2 * m * nn * k,
                    m * nn / 2, by, 2 * m * nn, {}))
    # ---- resnet50.yaml
    rc = [(128, 64, 56, 56, 64, 3, 1), (128, 64, 56, 56, 256, 1, 0), (128, 256, 56, 56, 64, 1, 0),
          (128, 128, 28, 28, 128, 3, 1), (128, 128, 28, 28, 512, 1, 0), (128, 256, 14, 14, 256, 3, 1),
          (128, 256, 14, 14, 1024, 1, 0), (128, 512, 7, 7, 512, 3, 1), (128, 512, 7, 7, 2048, 1, 0),
          (128, 2048, 7, 7, 512, 1, 0)]
    for wl in ("conv_bn_relu", "conv_alone"):
        for n, c, hh, ww, k, r, pad in rc:
            for dt in ("bfloat16", "float16"):
                e = B[dt]
                p = hh + 2 * pad - r + 1
                q = ww + 2 * pad - r + 1
                flops = 2 * n * p * q * k * c * r * r
                by = e * (n * c * hh * ww + k * c * r * r + n * k * p * q + (4 * k if wl == "conv_bn_relu" else 0))
                vec = 3 * n * k * p * q if wl == "conv_bn_relu" else 0  # BN 2 + ReLU 1
                out.append((wl, f"n={n},c={c},h={hh},w={ww},k={k},r={r},s={r},stride=1,pad={pad},{dt}", dt,
                            flops, vec, by, 0, {}))
    # ---- resnet50_forward.yaml: build ResNet-50 v1.5 myself
    out.append(resnet50(256, 224))
    return out


def conv_out(h, r, stride, pad):
    return (h + 2 * pad - r) // stride + 1


def resnet50(batch, img):
    macs = 0
    nparams = 0
    bn_ch = 0
    vec = 0
    def conv(c, h, k, r, stride, pad):
        nonlocal macs, nparams
        p = conv_out(h, r, stride, pad)
        macs += batch * p * p * k * c * r * r
        nparams += k * c * r * r
        return p
    def bn(k, p, relu=True, add=False):
        nonlocal nparams, bn_ch, vec
        nparams += 4 * k  # weight, bias, running mean, running var
        bn_ch += k
        vec += batch * k * p * p * (2 + (1 if relu else 0) + (1 if add else 0))
    h = conv(3, img, 64, 7, 2, 3)
    bn(64, h)
    hp = conv_out(h, 3, 2, 1)
    vec += 9 * batch * 64 * hp * hp  # 3x3 max pool
    h = hp
    cin = 64
    for width, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
        for i in range(blocks):
            s = stride if i == 0 else 1
            a = conv(cin, h, width, 1, 1, 0)
            bn(width, a)
            b = conv(width, a, width, 3, s, 1)  # v1.5: stride on the 3x3
            bn(width, b)
            c = conv(width, b, 4 * width, 1, 1, 0)
            bn(4 * width, c, relu=False)
            if i == 0:
                d = conv(cin, h, 4 * width, 1, s, 0)
                bn(4 * width, d, relu=False)
            vec += batch * 4 * width * c * c * 2  # add + relu
            cin, h = 4 * width, c
    vec += batch * 2048 * h * h  # global mean: h*h per output, batch*2048 outputs
    macs += batch * 2048 * 1000
    nparams += 2048 * 1000 + 1000
    flops = 2 * macs
    by = 2 * (batch * 3 * img * img + nparams + batch * 1000)
    return ("resnet50", f"batch={batch},img={img},bfloat16", "bfloat16", flops, vec, by, 0,
            {"_nparams": nparams, "_bn_ch": bn_ch})


def tsol(flops, vec, by, bus, gpu, unit, vec_unit):
    P = PEAKS[gpu]
    terms = {"compute": flops / P[unit], "vector": vec / P[vec_unit], "memory": by / P["bw"]}
    if bus:
        terms = {"link": bus / P["link"], **terms}
    bound = max(terms, key=terms.get)
    return terms[bound], bound


if __name__ == "__main__":
    for row in cases():
        print(row[:7])
