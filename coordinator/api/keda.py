"""KEDA's external scaler service (``externalscaler.ExternalScaler``).

Each call is proto -> ``ScalerQuery`` -> the engine's figures -> proto; the
rules are in ``engine/scaling.py``, which serves every caller of one query
shape from one cached figure (refreshed at most once a second). StreamIsActive
answers at once and then whenever the answer changes, checking every
``stream_interval_s``; the streams open at once, and token-less calls per
peer, are bounded by the limits interceptor (request_limits.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import grpc

from coordinator.engine import Engine
from coordinator.engine.scaling import METRIC_NAME, ScalerQuery, demand
from workflowjobs.externalscaler import externalscaler_pb2 as kpb
from workflowjobs.externalscaler import externalscaler_pb2_grpc as kpb_grpc


class ExternalScalerServicer(kpb_grpc.ExternalScalerServicer):
    def __init__(self, engine: Engine, stream_interval_s: float = 5.0) -> None:
        self._engine = engine
        self._interval = stream_interval_s

    async def IsActive(
        self,
        request: kpb.ScaledObjectRef,
        context: grpc.aio.ServicerContext[kpb.ScaledObjectRef, kpb.IsActiveResponse],
    ) -> kpb.IsActiveResponse:
        query = ScalerQuery.from_metadata(request.scalerMetadata)
        return kpb.IsActiveResponse(
            result=demand(await self._engine.scaling.scaler_figures(query)) > 0
        )

    async def StreamIsActive(
        self,
        request: kpb.ScaledObjectRef,
        context: grpc.aio.ServicerContext[kpb.ScaledObjectRef, kpb.IsActiveResponse],
    ) -> AsyncIterator[kpb.IsActiveResponse]:
        query = ScalerQuery.from_metadata(request.scalerMetadata)
        last: bool | None = None
        while True:
            active = demand(await self._engine.scaling.scaler_figures(query)) > 0
            if active != last:
                yield kpb.IsActiveResponse(result=active)
                last = active
            await asyncio.sleep(self._interval)

    async def GetMetricSpec(
        self,
        request: kpb.ScaledObjectRef,
        context: grpc.aio.ServicerContext[kpb.ScaledObjectRef, kpb.GetMetricSpecResponse],
    ) -> kpb.GetMetricSpecResponse:
        query = ScalerQuery.from_metadata(request.scalerMetadata)
        target = query.target_per_replica
        return kpb.GetMetricSpecResponse(
            metricSpecs=[
                kpb.MetricSpec(
                    metricName=METRIC_NAME, targetSize=max(1, round(target)), targetSizeFloat=target
                )
            ]
        )

    async def GetMetrics(
        self,
        request: kpb.GetMetricsRequest,
        context: grpc.aio.ServicerContext[kpb.GetMetricsRequest, kpb.GetMetricsResponse],
    ) -> kpb.GetMetricsResponse:
        query = ScalerQuery.from_metadata(request.scaledObjectRef.scalerMetadata)
        value = demand(await self._engine.scaling.scaler_figures(query))
        return kpb.GetMetricsResponse(
            metricValues=[
                kpb.MetricValue(
                    metricName=request.metricName or METRIC_NAME,
                    metricValue=value,
                    metricValueFloat=float(value),
                )
            ]
        )
