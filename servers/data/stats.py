"""Statistics tools: correlation, t-tests with effect sizes, OLS regression, normality, ANOVA and chi-square tests.

scipy and statsmodels are imported on first use.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Annotated, Any, Literal

from mcp_types import CallToolResult
from pydantic import Field

from servers._common import ToolError, json_result, table_result
from servers._hints import READ_ONLY
from servers._toolset import Toolset, tool
from servers.data.store import FrameName, FrameStore, check_columns, numeric_columns

if TYPE_CHECKING:
    import pandas as pd

Alpha = Annotated[float, Field(gt=0, lt=0.5, description="significance level")]
Column = Annotated[str, Field(min_length=1, description="numeric column to test")]
GroupColumn = Annotated[str, Field(min_length=1, description="category column defining the groups")]


def _f(value: Any) -> float | None:
    number = float(value)
    return None if math.isnan(number) else round(number, 8)


def _numeric(series: pd.Series[Any], what: str) -> pd.Series[Any]:
    import pandas as pd

    if not pd.api.types.is_numeric_dtype(series):
        raise ToolError(f"{what} is not numeric")
    clean = series.dropna()
    if len(clean) < 2:
        raise ToolError(f"{what} has fewer than two values")
    return clean


def _groups(frame: pd.DataFrame, value: str, group: str, name: str) -> dict[str, pd.Series[Any]]:
    check_columns(frame, [value, group], name)
    _numeric(frame[value], f"column {value!r}")
    parts = {str(k): g[value].dropna() for k, g in frame.groupby(group)}
    return {k: v for k, v in parts.items() if len(v)}


class StatsTools(Toolset):
    """Statistical tests and models over named frames."""

    def __init__(self, store: FrameStore) -> None:
        self.store = store

    @tool(
        name="stats_correlation",
        description=(
            "Correlation matrix (Pearson, Spearman or Kendall) of numeric columns, with the p-value of every pair "
            "ranked by strength. Use to find which variables move together. Returns the matrix and the pairs."
        ),
        annotations=READ_ONLY,
    )
    def stats_correlation(
        self,
        name: FrameName,
        columns: Annotated[list[str] | None, Field(description="numeric columns (default all)")] = None,
        method: Annotated[
            Literal["pearson", "spearman", "kendall"], Field(description="correlation coefficient")
        ] = "pearson",
    ) -> CallToolResult:
        from scipy import stats

        data = numeric_columns(self.store.get(name), columns, name)
        if data.shape[1] < 2:
            raise ToolError("correlation needs at least two numeric columns")
        matrix = data.corr(method=method)
        tests = {"pearson": stats.pearsonr, "spearman": stats.spearmanr, "kendall": stats.kendalltau}
        pairs: list[dict[str, Any]] = []
        cols = list(matrix.columns)
        for i, a in enumerate(cols):
            for b in cols[i + 1 :]:
                both = data[[a, b]].dropna()
                p = _f(tests[method](both[a], both[b])[1]) if len(both) > 2 else None
                pairs.append({"a": str(a), "b": str(b), "r": _f(matrix.loc[a, b]), "p": p, "n": len(both)})
        pairs.sort(key=lambda d: -abs(d["r"] or 0.0))
        rows = [[str(r), *[_f(v) for v in matrix.loc[r]]] for r in cols]
        return table_result(["column", *map(str, cols)], rows, title=f"{method} correlation", pairs=pairs)

    @tool(
        name="stats_ttest",
        description=(
            "Student/Welch t-test: one-sample (column vs `mu`), two-sample (column split by a two-valued `group` "
            "column, Welch by default) or paired (two columns). Returns t, degrees of freedom, p-value, the mean "
            "difference with its confidence interval and Cohen's d effect size."
        ),
        annotations=READ_ONLY,
    )
    def stats_ttest(
        self,
        name: FrameName,
        kind: Annotated[Literal["one-sample", "two-sample", "paired"], Field(description="which t-test")],
        column: Annotated[str, Field(description="numeric column (the first one for paired)")],
        mu: Annotated[float, Field(description="hypothesised mean (one-sample)")] = 0.0,
        group: Annotated[str | None, Field(description="two-valued column (two-sample)")] = None,
        other: Annotated[str | None, Field(description="second numeric column (paired)")] = None,
        equal_var: Annotated[bool, Field(description="pooled variance instead of Welch (two-sample)")] = False,
        alternative: Annotated[
            Literal["two-sided", "less", "greater"], Field(description="alternative hypothesis")
        ] = "two-sided",
        alpha: Alpha = 0.05,
    ) -> CallToolResult:
        from scipy import stats

        frame = self.store.get(name)
        check_columns(frame, [column], name)
        body: dict[str, Any] = {"kind": kind}
        if kind == "one-sample":
            x = _numeric(frame[column], f"column {column!r}")
            res = stats.ttest_1samp(x, mu, alternative=alternative)
            d = (x.mean() - mu) / x.std(ddof=1)
            body |= {"n": len(x), "mean": _f(x.mean()), "mu": mu}
        elif kind == "paired":
            if not other:
                raise ToolError("a paired t-test needs `other`, the second column")
            check_columns(frame, [other], name)
            both = frame[[column, other]].dropna()
            a, b = _numeric(both[column], column), _numeric(both[other], other)
            res = stats.ttest_rel(a, b, alternative=alternative)
            diff = a - b
            d = diff.mean() / diff.std(ddof=1)
            body |= {"n": len(diff), "meanDifference": _f(diff.mean())}
        else:
            if not group:
                raise ToolError("a two-sample t-test needs `group`, a column with exactly two values")
            parts = _groups(frame, column, group, name)
            if len(parts) != 2:
                raise ToolError(f"column {group!r} has {len(parts)} groups ({list(parts)[:10]}); need exactly two")
            (ka, a), (kb, b) = parts.items()
            res = stats.ttest_ind(a, b, equal_var=equal_var, alternative=alternative)
            pooled = math.sqrt(((len(a) - 1) * a.var() + (len(b) - 1) * b.var()) / (len(a) + len(b) - 2))
            d = (a.mean() - b.mean()) / pooled
            body |= {"groups": {ka: {"n": len(a), "mean": _f(a.mean())}, kb: {"n": len(b), "mean": _f(b.mean())}}}
        ci = res.confidence_interval(confidence_level=1 - alpha)
        body |= {
            "t": _f(res.statistic),
            "df": _f(res.df),
            "p": _f(res.pvalue),
            "significant": bool(res.pvalue < alpha),
            "confidenceInterval": [_f(ci.low), _f(ci.high)],
            "cohensD": _f(d),
            "effect": _effect_label(abs(float(d))),
        }
        return json_result(body)

    @tool(
        name="stats_regression",
        description=(
            "Fit an ordinary least squares regression with statsmodels, from an R-style formula such as "
            "'price ~ area + C(city)' (C() marks categories, ':' interactions). Use to quantify how predictors "
            "relate to an outcome. Returns coefficients with standard errors, t, p-values and CIs, R², adjusted R², "
            "F-test and AIC/BIC."
        ),
        annotations=READ_ONLY,
    )
    def stats_regression(
        self,
        name: FrameName,
        formula: Annotated[str, Field(min_length=3, max_length=1000, description="e.g. 'y ~ x1 + x2'")],
        robust: Annotated[bool, Field(description="heteroskedasticity-robust (HC3) standard errors")] = False,
    ) -> CallToolResult:
        import statsmodels.formula.api as smf

        frame = self.store.get(name)
        if "~" not in formula:
            raise ToolError("formula must look like 'outcome ~ predictor1 + predictor2'")
        try:
            model = smf.ols(formula, data=frame).fit(cov_type="HC3" if robust else "nonrobust")
        except Exception as exc:  # patsy raises its own error types for bad formulas and columns
            raise ToolError(f"cannot fit {formula!r}: {type(exc).__name__}: {exc}") from None
        ci = model.conf_int()
        rows = [
            [
                str(term),
                _f(model.params[term]),
                _f(model.bse[term]),
                _f(model.tvalues[term]),
                _f(model.pvalues[term]),
                _f(ci.loc[term, 0]),
                _f(ci.loc[term, 1]),
            ]
            for term in model.params.index
        ]
        return table_result(
            ["term", "coef", "stdErr", "t", "p", "ciLow", "ciHigh"],
            rows,
            title=f"OLS {formula}: R²={model.rsquared:.4f}, n={int(model.nobs)}",
            n=int(model.nobs),
            rSquared=_f(model.rsquared),
            adjRSquared=_f(model.rsquared_adj),
            fStatistic=_f(model.fvalue),
            fPValue=_f(model.f_pvalue),
            aic=_f(model.aic),
            bic=_f(model.bic),
        )

    @tool(
        name="stats_normality",
        description=(
            "Test whether a numeric column is normally distributed: Shapiro-Wilk, D'Agostino-Pearson and "
            "Kolmogorov-Smirnov (against a normal with the sample's mean and sd), plus skewness and kurtosis. Use "
            "before choosing a parametric test. Returns each test's statistic and p-value."
        ),
        annotations=READ_ONLY,
    )
    def stats_normality(self, name: FrameName, column: Column, alpha: Alpha = 0.05) -> CallToolResult:
        from scipy import stats

        x = _numeric(self.store.column(name, column), f"column {column!r}")
        if len(x) < 8:
            raise ToolError(f"column {column!r} has {len(x)} values; normality tests need at least 8")
        tests = {
            "shapiro": stats.shapiro(x[:5000]),
            "dagostino": stats.normaltest(x),
            "ks": stats.kstest(x, "norm", args=(x.mean(), x.std(ddof=1))),
        }
        results = {k: {"statistic": _f(v[0]), "p": _f(v[1]), "normal": bool(v[1] >= alpha)} for k, v in tests.items()}
        return json_result(
            {"n": len(x), "skewness": _f(stats.skew(x)), "kurtosis": _f(stats.kurtosis(x)), "tests": results}
        )

    @tool(
        name="stats_anova",
        description=(
            "Compare the means of a numeric column across the groups of a category column: one-way ANOVA (F, p, "
            "eta squared) plus the Kruskal-Wallis rank test and Levene's test for equal variances. Use when there "
            "are more than two groups. Returns per-group n/mean/sd and the test results."
        ),
        annotations=READ_ONLY,
    )
    def stats_anova(self, name: FrameName, value: Column, group: GroupColumn) -> CallToolResult:
        from scipy import stats

        parts = _groups(self.store.get(name), value, group, name)
        if len(parts) < 2 or any(len(v) < 2 for v in parts.values()):
            raise ToolError(f"ANOVA needs at least two groups of two values; {group!r} gives {len(parts)} groups")
        samples = list(parts.values())
        f_res, k_res, l_res = stats.f_oneway(*samples), stats.kruskal(*samples), stats.levene(*samples)
        allv = [v for s in samples for v in s]
        grand = sum(allv) / len(allv)
        ss_between = sum(len(s) * (s.mean() - grand) ** 2 for s in samples)
        ss_total = sum((v - grand) ** 2 for v in allv)
        groups = {k: {"n": len(v), "mean": _f(v.mean()), "sd": _f(v.std(ddof=1))} for k, v in parts.items()}
        return json_result(
            {
                "groups": groups,
                "anova": {"F": _f(f_res.statistic), "p": _f(f_res.pvalue), "etaSquared": _f(ss_between / ss_total)},
                "kruskal": {"H": _f(k_res.statistic), "p": _f(k_res.pvalue)},
                "levene": {"W": _f(l_res.statistic), "p": _f(l_res.pvalue)},
            }
        )

    @tool(
        name="stats_chi_square",
        description=(
            "Chi-square test of independence between two categorical columns (contingency table, expected counts, "
            "Cramér's V), or a goodness-of-fit test of one column against given expected proportions. Use for "
            "relationships between categories. Returns chi², dof, p-value and the observed table."
        ),
        annotations=READ_ONLY,
    )
    def stats_chi_square(
        self,
        name: FrameName,
        column: Annotated[str, Field(description="first categorical column")],
        other: Annotated[str | None, Field(description="second categorical column (independence test)")] = None,
        expected: Annotated[
            dict[str, float] | None, Field(description="category -> proportion (goodness of fit)")
        ] = None,
    ) -> CallToolResult:
        import pandas as pd
        from scipy import stats

        frame = self.store.get(name)
        check_columns(frame, [column, *([other] if other else [])], name)
        if other:
            table = pd.crosstab(frame[column], frame[other])
            if min(table.shape) < 2:
                raise ToolError("each column needs at least two categories for an independence test")
            chi2, p, dof, exp = stats.chi2_contingency(table)
            v = math.sqrt(chi2 / (table.to_numpy().sum() * (min(table.shape) - 1)))
            observed = {str(r): {str(c): int(n) for c, n in row.items()} for r, row in table.iterrows()}
            return json_result(
                {
                    "test": "independence",
                    "chi2": _f(chi2),
                    "dof": int(dof),
                    "p": _f(p),
                    "cramersV": _f(v),
                    "observed": observed,
                    "minExpected": _f(exp.min()),
                }
            )
        if not expected:
            raise ToolError("give `other` (independence test) or `expected` proportions (goodness of fit)")
        counts = frame[column].astype(str).value_counts()
        unknown = sorted(set(counts.index) - set(expected))
        if unknown:
            raise ToolError(f"expected has no proportion for categories {unknown[:10]}")
        total, share = int(counts.sum()), sum(expected.values())
        keys = list(expected)
        obs = [int(counts.get(k, 0)) for k in keys]
        exp_counts = [total * expected[k] / share for k in keys]
        chi2, p = stats.chisquare(obs, exp_counts)
        return json_result(
            {
                "test": "goodness-of-fit",
                "chi2": _f(chi2),
                "dof": len(keys) - 1,
                "p": _f(p),
                "observed": dict(zip(keys, obs, strict=True)),
                "expected": dict(zip(keys, [round(e, 4) for e in exp_counts], strict=True)),
            }
        )


def _effect_label(d: float) -> str:
    return "negligible" if d < 0.2 else "small" if d < 0.5 else "medium" if d < 0.8 else "large"
