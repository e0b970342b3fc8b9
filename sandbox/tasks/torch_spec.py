"""The ``[torch]`` table of a task.toml: the task is a PyTorch module, whose problem file computes the
reference, generates the inputs and parameters, and serves as the baselines (eager and ``torch.compile``)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

BASELINES = ("eager", "compile")


class TorchSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    problem: str = Field("problem.py", pattern=r"^[A-Za-z0-9_.-]+\.py$",
                         description="The KernelBench-format problem file, beside task.toml.")
    arguments: list[str] = Field(description="forward()'s arguments in order, as the names of task inputs or scalars.")
    parameters: dict[str, str] = Field(default_factory=dict,
                                       description="Task input name -> the module's parameter or buffer it holds.")
    outputs: list[str] = Field(min_length=1, description="forward()'s outputs in order, as task output names.")
    reference_dtype: Literal["float64", "native"] = Field(
        "float64", description="float64: the reference runs the module in float64; native: in its own dtypes.")
    baselines: list[Literal["eager", "compile"]] = Field(
        default_factory=lambda: list(BASELINES), description="PyTorch implementations timed beside the candidate.")
    tied: dict[str, list[str]] = Field(default_factory=dict,
                                       description="Size symbol -> constants of the problem that always take its value.")
    fixed: dict[str, str] = Field(default_factory=dict,
                                  description="Constants of the problem that keep their value at every size, and why.")
    mutated: list[str] = Field(default_factory=list, description=(
        "Inputs (of torch.parameters) that forward updates in place: a batch norm's running statistics in training "
        "mode. They are the module's own state: the PyTorch baselines update private copies, and the inputs a "
        "candidate receives stay as drawn."))
    updated: dict[str, str] = Field(default_factory=dict, description=(
        "Mutated input -> the task output that holds its value after forward: a candidate must compute the update "
        "and write it there, and it is checked like any output. Empty: a candidate need not update them "
        "(KernelBench compares forward's outputs only)."))
