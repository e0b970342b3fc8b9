"""Correct. Uses what reads frames inside the library on its own behalf: a namedtuple, a dataclass, typing, an enum,
a logged warning and a formatted traceback of an error it catches. None of that hands it a frame."""
import collections
import dataclasses
import enum
import logging
import traceback
import typing

import torch
import torch.nn as nn

Bounds = collections.namedtuple("Bounds", "lower upper")
T = typing.TypeVar("T")
Mode = enum.Enum("Mode", "clamp")
LOG = logging.getLogger("library_frames")


@dataclasses.dataclass
class Settings:
    bounds: Bounds
    mode: Mode = Mode.clamp


class ModelNew(nn.Module):
    def __init__(self, lower, upper):
        super().__init__()
        self.settings = Settings(Bounds(lower, upper))
        try:
            {}["missing"]
        except KeyError:
            self.note = traceback.format_exc()

    def forward(self, x):
        LOG.warning("forward on %s", tuple(x.shape))
        b = self.settings.bounds
        return torch.clamp(x * torch.sigmoid(x), min=b.lower, max=b.upper)
