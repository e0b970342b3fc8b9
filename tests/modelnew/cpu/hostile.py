"""Looks for keys, the user's files and the network at import, prints what it found (with an escape sequence), and
then answers correctly."""
import os
import socket

import torch
import torch.nn as nn

seen = []
try:
    seen.append("key=" + os.environ["OPENAI_API_KEY"])
except KeyError as e:
    seen.append("key:" + type(e).__name__)
try:
    seen.append("ssh=" + open(os.path.expanduser("~/../../root/.ssh/id_rsa")).read())
except OSError as e:
    seen.append("ssh:" + type(e).__name__)
try:
    socket.create_connection(("1.1.1.1", 443), timeout=2)
    seen.append("net=open")
except OSError as e:
    seen.append("net:" + type(e).__name__)
print("\x1b[2J" + " ".join(seen))


class ModelNew(nn.Module):
    def __init__(self, lower, upper):
        super().__init__()
        self.lower, self.upper = lower, upper

    def forward(self, x):
        return torch.clamp(x * torch.sigmoid(x), min=self.lower, max=self.upper)
