"""The PyTorch models the ONNX tests export, and their PyTorch reference training.

Each model is built from a fixed seed, exported to ONNX the way README tells a user to
(opset 13, TrainingMode.TRAINING, do_constant_folding=False, a dynamic batch axis: the
initializers keep the module's state-dict names), and trained K steps with plain SGD on fixed
batches; tandem trains the same ONNX file on the same batches and its consolidated state dict
is loaded back into the module and compared (check_training below).

Shapes: B batch; mlp input [B,3,4] -> [B,5] logits; cnn_bn [B,1,8,8] -> [B,10] logits;
unet3d [B,1,8,8,8] -> [B,1,8,8,8] probabilities (Sigmoid), target 0/1 masks.
"""
import copy

import onnx
import torch
import torch.nn as nn
import torch.nn.functional as F
from onnx import numpy_helper

STEPS = 3
LR = 0.1


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Flatten(), nn.Linear(12, 16), nn.ReLU(), nn.Linear(16, 16),
                                 nn.Tanh(), nn.Linear(16, 5))

    def forward(self, x):
        return self.net(x)


class CnnBn(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.conv2 = nn.Conv2d(4, 6, 3, stride=2, padding=1)
        self.fc = nn.Linear(6 * 2 * 2, 10)

    def forward(self, x):
        x = F.max_pool2d(torch.relu(self.bn(self.conv(x))), 2)
        x = torch.relu(self.conv2(x))
        return self.fc(torch.flatten(x, 1))


class Unet3d(nn.Module):
    """Two levels: encoder (conv, instance norm, relu), pool, bottom, transposed conv up,
    the skip concatenated, decoder conv, 1x1x1 conv and sigmoid."""

    def __init__(self):
        super().__init__()
        self.enc = nn.Sequential(nn.Conv3d(1, 4, 3, padding=1), nn.InstanceNorm3d(4, affine=True),
                                 nn.ReLU())
        self.bottom = nn.Sequential(nn.Conv3d(4, 8, 3, padding=1),
                                    nn.InstanceNorm3d(8, affine=True), nn.ReLU())
        self.up = nn.ConvTranspose3d(8, 4, 2, stride=2)
        self.dec = nn.Sequential(nn.Conv3d(8, 4, 3, padding=1), nn.ReLU())
        self.out = nn.Conv3d(4, 1, 1)

    def forward(self, x):
        skip = self.enc(x)
        b = self.bottom(F.max_pool3d(skip, 2))
        return torch.sigmoid(self.out(self.dec(torch.cat([self.up(b), skip], 1))))


class Blocks(nn.Module):
    """The blocks of users' models beyond convolutions, as PyTorch exports them at opset 13:
    GroupNorm (Reshape, InstanceNormalization, Reshape to Shape(x), Mul, Add), PReLU, ReLU6
    (Clip), x.view(x.size(0), -1) (Shape, Gather, Unsqueeze, Concat, Reshape), LayerNorm
    (ReduceMean, Sub, Pow, Sqrt, Div, Mul, Add) and GELU (Erf)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv3d(1, 4, 3, padding=1)
        self.norm = nn.GroupNorm(2, 4)
        self.act = nn.PReLU(4)
        self.conv2 = nn.Conv3d(4, 4, 3, stride=2, padding=1)
        self.fc = nn.Linear(4 * 3 * 3 * 3, 16)
        self.ln = nn.LayerNorm(16)
        self.head = nn.Linear(16, 3)

    def forward(self, x):
        x = self.act(self.norm(self.conv(x)))
        x = F.relu6(3 * self.conv2(x))
        x = x.view(x.size(0), -1)
        return self.head(F.gelu(self.ln(self.fc(x))))


class PlanUnet(nn.Module):
    """A user's 3D U-Net for the memory plan's checks: 8, 16, 32 and 64 filters, two 3x3x3
    convolutions with ReLU per level, 3 max poolings, transposed convolutions up, the skips
    concatenated, a 1x1x1 convolution and a sigmoid (350,457 parameters)."""

    def __init__(self, f=(8, 16, 32, 64)):
        super().__init__()

        def double(i, o):
            return nn.Sequential(nn.Conv3d(i, o, 3, padding=1), nn.ReLU(),
                                 nn.Conv3d(o, o, 3, padding=1), nn.ReLU())

        self.e0, self.e1, self.e2 = double(1, f[0]), double(f[0], f[1]), double(f[1], f[2])
        self.b = double(f[2], f[3])
        self.u2, self.d2 = nn.ConvTranspose3d(f[3], f[2], 2, stride=2), double(2 * f[2], f[2])
        self.u1, self.d1 = nn.ConvTranspose3d(f[2], f[1], 2, stride=2), double(2 * f[1], f[1])
        self.u0, self.d0 = nn.ConvTranspose3d(f[1], f[0], 2, stride=2), double(2 * f[0], f[0])
        self.out = nn.Conv3d(f[0], 1, 1)

    def forward(self, x):
        a = self.e0(x)
        b = self.e1(F.max_pool3d(a, 2))
        c = self.e2(F.max_pool3d(b, 2))
        m = self.b(F.max_pool3d(c, 2))
        c = self.d2(torch.cat([self.u2(m), c], 1))
        b = self.d1(torch.cat([self.u1(c), b], 1))
        a = self.d0(torch.cat([self.u0(b), a], 1))
        return torch.sigmoid(self.out(a))


def export_volume_model(model, path, fixed=None):
    """Exports a [B,1,D,H,W] model with every axis but the channels dynamic, as a user exports
    a model for volumes of any size; with `fixed` (D, H, W) only the batch axis is dynamic, as
    a user exports a model for its training crop."""
    dynamic = {0: "batch"} if fixed else {0: "batch", 2: "depth", 3: "height", 4: "width"}
    torch.onnx.export(model, torch.randn(2, 1, *(fixed or (16, 16, 16))), path, opset_version=13,
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                      input_names=["input"], output_names=["output"],
                      dynamic_axes={"input": dynamic, "output": dynamic})


def soft_dice_loss(p, t):
    p, t = p.flatten(1), t.flatten(1)
    dice = (2 * (p * t).sum(1) + 1) / (p.sum(1) + t.sum(1) + 1)
    return (1 - dice).mean()


def dice_bce(p, t):
    return soft_dice_loss(p, t) + F.binary_cross_entropy(p, t)


# name -> (module class, loss name for tandem, loss function, batch size, input shape, target)
def classes(b, n, gen):
    return torch.randint(n, (b,), generator=gen)


MODELS = {
    "mlp": (Mlp, "cross-entropy", F.cross_entropy, 10, (3, 4), lambda b, g: classes(b, 5, g)),
    "cnn_bn": (CnnBn, "cross-entropy", F.cross_entropy, 6, (1, 8, 8),
               lambda b, g: classes(b, 10, g)),
    "unet3d": (Unet3d, "dice+bce", dice_bce, 5, (1, 8, 8, 8),
               lambda b, g: (torch.rand((b, 1, 8, 8, 8), generator=g) > 0.6).float()),
    "blocks": (Blocks, "cross-entropy", F.cross_entropy, 6, (1, 6, 6, 6),
               lambda b, g: classes(b, 3, g)),
}


def build(name):
    torch.manual_seed({"mlp": 1, "cnn_bn": 2, "unet3d": 3, "blocks": 4}[name])
    return MODELS[name][0]()


def batches(name):
    _, _, _, batch, shape, target = MODELS[name]
    gen = torch.Generator().manual_seed(7)
    out = {}
    for k in range(STEPS):
        out[f"input/{k}"] = torch.randn((batch,) + shape, generator=gen)
        out[f"target/{k}"] = target(batch, gen)
    return out


def export(model, path, shape):
    """Exports `model` with its own state: the export traces one forward in training mode,
    which moves batch norm's running statistics (in the module and in the file); both are
    put back to what they were."""
    state = copy.deepcopy(model.state_dict())
    torch.onnx.export(model, torch.randn((2,) + shape), path, opset_version=13,
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                      input_names=["input"], output_names=["output"],
                      dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}})
    model.load_state_dict(state)
    exported = onnx.load(path)
    for t in exported.graph.initializer:
        if t.name in state:
            t.CopyFrom(numpy_helper.from_array(state[t.name].numpy(), t.name))
    onnx.save(exported, path)


def reference_training(name):
    """The module after STEPS steps of SGD(LR) on batches(name), in training mode."""
    model = build(name)
    loss_fn = MODELS[name][2]
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    data = batches(name)
    model.train()
    for k in range(STEPS):
        opt.zero_grad()
        loss_fn(model(data[f"input/{k}"]), data[f"target/{k}"]).backward()
        opt.step()
    return model


def forward_reference(name):
    """{input, train, eval}: the module's outputs in training and evaluation mode."""
    model = build(name)
    shape = MODELS[name][4]
    x = torch.randn((4,) + shape, generator=torch.Generator().manual_seed(11))
    with torch.no_grad():
        train = copy.deepcopy(model).train()(x)
        evaluated = copy.deepcopy(model).eval()(x)
    return {"input": x, "train": train, "eval": evaluated}


def check_training(name, state_path):
    """Loads tandem's consolidated state dict into the module (strictly: every name must be
    the module's) and compares it with PyTorch's own training. Returns the largest difference
    relative to each tensor's largest magnitude."""
    model = build(name)
    model.load_state_dict(torch.load(state_path), strict=True)
    reference = reference_training(name).state_dict()
    worst = 0.0
    for key, want in reference.items():
        got = model.state_dict()[key]
        if not want.is_floating_point():
            if not torch.equal(got, want):
                raise AssertionError(f"{key}: tandem {got.tolist()}, PyTorch {want.tolist()}")
            continue
        scale = max(want.abs().max().item(), 1e-12)
        worst = max(worst, (got - want).abs().max().item() / scale)
    return worst
