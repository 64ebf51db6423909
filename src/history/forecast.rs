//! Forecasts.
