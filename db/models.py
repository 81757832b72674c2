"""The store's tables. Prefixed ``ts_`` because Optuna's own tables share the database."""
from __future__ import annotations

from datetime import datetime, timezone

from sqlalchemy import (JSON, BigInteger, DateTime, Float, ForeignKey, Integer, String, Text,
                        UniqueConstraint)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

SCHEMA_VERSION = 1


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


# What makes a GPU row one of its own (a model in a software environment), and a trial one of its own.
GPU_IDENTITY = ("name", "driver", "torch_version", "triton_version")
TRIAL_KEY = ("gpu_name", "m", "n", "k", "group_size", "layout", "variant_id", "code_version")


class Base(DeclarativeBase):
    pass


class Meta(Base):
    __tablename__ = "ts_meta"
    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[str] = mapped_column(String(256))


class GPU(Base):
    """One GPU model in one software environment, with its measured ceilings."""
    __tablename__ = "ts_gpus"
    __table_args__ = (UniqueConstraint(*GPU_IDENTITY),)
    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(128), index=True)
    capability: Mapped[str] = mapped_column(String(16))
    sm_count: Mapped[int] = mapped_column(Integer)
    l2_bytes: Mapped[int] = mapped_column(BigInteger)
    memory_bytes: Mapped[int] = mapped_column(BigInteger)  # 150 GB on an H200: past int4
    driver: Mapped[str] = mapped_column(String(64))
    torch_version: Mapped[str] = mapped_column(String(64))
    triton_version: Mapped[str] = mapped_column(String(64))
    copy_bandwidth: Mapped[float] = mapped_column(Float)  # bytes/s, read + written
    datasheet_bandwidth: Mapped[float | None] = mapped_column(Float, nullable=True)
    measured_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class Sweep(Base):
    __tablename__ = "ts_sweeps"
    id: Mapped[int] = mapped_column(primary_key=True)
    gpu_id: Mapped[int] = mapped_column(ForeignKey("ts_gpus.id"))
    settings: Mapped[dict] = mapped_column(JSON)
    versions: Mapped[dict] = mapped_column(JSON)
    host: Mapped[str] = mapped_column(String(256))
    status: Mapped[str] = mapped_column(String(16), default="running")
    started_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    trials_run: Mapped[int] = mapped_column(Integer, default=0)


class Trial(Base):
    """One variant measured (or failed) at one key. Unique per key, variant and kernel code."""
    __tablename__ = "ts_trials"
    __table_args__ = (UniqueConstraint(*TRIAL_KEY, name="uq_trial_key"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    sweep_id: Mapped[int | None] = mapped_column(ForeignKey("ts_sweeps.id"), nullable=True)
    gpu_id: Mapped[int] = mapped_column(ForeignKey("ts_gpus.id"))
    gpu_name: Mapped[str] = mapped_column(String(128))
    m: Mapped[int] = mapped_column(Integer)
    n: Mapped[int] = mapped_column(Integer)
    k: Mapped[int] = mapped_column(Integer)
    group_size: Mapped[int] = mapped_column(Integer)
    layout: Mapped[str] = mapped_column(String(32), default="base")
    variant_id: Mapped[str] = mapped_column(String(128))
    family: Mapped[str] = mapped_column(String(16))
    params: Mapped[dict] = mapped_column(JSON)
    code_version: Mapped[str] = mapped_column(String(32))
    status: Mapped[str] = mapped_column(String(16))  # ok | failed | wrong
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    us: Mapped[float | None] = mapped_column(Float, nullable=True)
    spread: Mapped[float | None] = mapped_column(Float, nullable=True)
    gbps: Mapped[float | None] = mapped_column(Float, nullable=True)
    roofline_frac: Mapped[float | None] = mapped_column(Float, nullable=True)
    tflops: Mapped[float | None] = mapped_column(Float, nullable=True)
    rel_error: Mapped[float | None] = mapped_column(Float, nullable=True)
    fp16_us: Mapped[float | None] = mapped_column(Float, nullable=True)
    speedup_fp16: Mapped[float | None] = mapped_column(Float, nullable=True)
    versions: Mapped[dict] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class Baseline(Base):
    """A peer timed on the same key in the same run (cuBLAS fp16, tinygemm, ...)."""
    __tablename__ = "ts_baselines"
    __table_args__ = (UniqueConstraint("gpu_name", "m", "n", "k", "kind"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    gpu_name: Mapped[str] = mapped_column(String(128))
    m: Mapped[int] = mapped_column(Integer)
    n: Mapped[int] = mapped_column(Integer)
    k: Mapped[int] = mapped_column(Integer)
    kind: Mapped[str] = mapped_column(String(32))
    us: Mapped[float] = mapped_column(Float)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
