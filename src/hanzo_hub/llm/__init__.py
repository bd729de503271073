"""Routed completion: model registry, query classifier, contextual bandit, router and cascade."""
