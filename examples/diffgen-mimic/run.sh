ehr-release run --input ../../../shared/data/mimic3-demo --algorithm diffgen --param epsilon=1 --param h=5 --param score=max --param taxonomies=mimic-demo --requester steward.sam --out out
