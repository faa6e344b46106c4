"""Models that label Window rows: decision tree, EM clustering and the POS run/wait heuristic, saved as bundles."""

from procsift.models.aggregate import reaggregate, reaggregate_cuts
from procsift.models.bundle import (
    Bundle, BundleVersionWarning, check_bundle_target, default_bundle_path, load_bundle, public_metadata,
    save_bundle,
)
from procsift.models.em import EMClassifier
from procsift.models.errors import (
    BundleError, IncompatibleModel, ModelError, TrainingDataError, UntrustedBundle,
)
from procsift.models.evaluation import cross_validate, score_predictions
from procsift.models.explain import Explanation
from procsift.models.features import FEATURE_NAMES, RAW_COLUMNS, TREE_FEATURE_NAMES, FeatureTransform
from procsift.models.kinds import MODEL_KINDS, make_pipeline
from procsift.models.pos import POSDetector
from procsift.models.smoothing import Smoother
from procsift.models.training import TraceSet, load_traces, train_bundle

__all__ = [
    "Bundle", "BundleError", "BundleVersionWarning", "EMClassifier", "Explanation", "FEATURE_NAMES",
    "FeatureTransform", "IncompatibleModel", "MODEL_KINDS", "ModelError", "POSDetector", "RAW_COLUMNS",
    "Smoother", "TREE_FEATURE_NAMES", "TraceSet", "TrainingDataError", "UntrustedBundle", "check_bundle_target",
    "cross_validate", "public_metadata",
    "default_bundle_path", "load_bundle", "load_traces", "make_pipeline", "reaggregate", "reaggregate_cuts",
    "save_bundle", "score_predictions", "train_bundle",
]
