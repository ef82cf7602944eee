import torch, torch.nn.functional as F
torch.backends.cuda.matmul.allow_tf32 = False
g = torch.Generator(device="cpu").manual_seed(0)
for dt in [torch.float32, torch.bfloat16, torch.float16]:
    x = torch.randn(4096, 768, generator=g).to("cuda", dt); w = (torch.randn(3072, 768, generator=g) * 768**-0.5).to("cuda", dt)
    b = torch.randn(3072, generator=g).to("cuda", dt)
    y = torch._addmm_activation(b, x, w.t(), use_gelu=True).double()
    h = torch.addmm(b.double(), x.double(), w.double().t())
    print(dt, "vs erf", (y - F.gelu(h)).abs().max().item(), "vs tanh", (y - F.gelu(h, approximate="tanh")).abs().max().item())
print("cudnn_convolution_relu:", torch.cudnn_convolution_relu.__doc__, torch.backends.cudnn.version())
