"""KEDA's external scaler interface (generated from protos/externalscaler; make proto)."""
