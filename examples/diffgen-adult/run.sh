ehr-release run --input adult.csv --class-column income --algorithm diffgen --param epsilon=1 --param h=10 --param score=max --param taxonomies=adult --requester steward.sam --out out
